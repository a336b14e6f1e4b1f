package auth

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"interlock/runtype"
)

// Config is the auth: section of the config file. Its keys are a public interface: extend,
// never rename. Without an auth: section the server makes one admin token of its own (see
// Generated).
type Config struct {
	// Tokens are static API tokens, each stored as the SHA-256 of the token, never the token.
	Tokens []Token `yaml:"tokens"`
	// JWT, when set, also accepts JSON Web Tokens from one identity provider.
	JWT *JWT `yaml:"jwt"`
	// OIDC, when set, signs staff into the console with an OpenID Connect provider
	// (Authorization Code + PKCE in the browser) and accepts the ID tokens it issues.
	OIDC *OIDC `yaml:"oidc"`
	// SeparationOfDuties, when true, forbids a principal to decide the tool calls of runs it
	// started itself (default false). The run service enforces it; auth only carries it.
	SeparationOfDuties bool `yaml:"separationOfDuties"`
}

// Token is one static API token.
type Token struct {
	// Subject names who holds the token; unique among the tokens.
	Subject string `yaml:"subject"`
	// Role is one role or a list of them, built-in (viewer, operator, approver, admin) or custom.
	Role Roles `yaml:"role"`
	// SHA256 is the SHA-256 of the token in hex (64 characters): `printf %s "$TOKEN" | sha256sum`.
	SHA256 string `yaml:"sha256"`
	// Resources, when the key is present, are the only resources the holder sees; [] is none.
	// Without the key the holder sees every resource.
	Resources []string `yaml:"resources"`
	// Agents, when the key is present, are the only agents the holder may request approvals
	// for (requestApproval, POST /approvals, the hooks); [] is none. Without the key, any
	// agent. A requester token given to one agent's pipeline or laptop names that agent, so
	// that it cannot file requests as another (and be told the policy's answers for it).
	Agents []string `yaml:"agents"`

	// nullResources and nullAgents record `resources:` or `agents:` with no value, which YAML
	// reads as absent (every resource, any agent) although it reads like none: rejected as
	// ambiguous.
	nullResources, nullAgents bool
}

// UnmarshalYAML decodes a token, telling `resources:` (null) apart from no key at all.
func (t *Token) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Token
	if err := unmarshal((*plain)(t)); err != nil {
		return err
	}
	var keys map[string]any
	if err := unmarshal(&keys); err == nil {
		v, ok := keys["resources"]
		t.nullResources = ok && v == nil
		v, ok = keys["agents"]
		t.nullAgents = ok && v == nil
	}
	return nil
}

// badRole stands for a role: value that is neither a name nor a list of names.
const badRole runtype.Role = "\x00"

// Roles is a list of roles that YAML may also write as a single name (`role: approver`).
type Roles []runtype.Role

// UnmarshalYAML accepts a role name or a list of role names.
func (r *Roles) UnmarshalYAML(unmarshal func(any) error) error {
	var one string
	if err := unmarshal(&one); err == nil {
		*r = Roles{runtype.Role(one)}
		return nil
	}
	var list []string
	if err := unmarshal(&list); err != nil {
		// Reported by Problems, where the path is known: a non-empty list holding one empty
		// name, so that it cannot pass for a role.
		*r = Roles{badRole}
		return nil
	}
	out := make(Roles, len(list))
	for i, s := range list {
		out[i] = runtype.Role(s)
	}
	*r = out
	return nil
}

// JWT says which JSON Web Tokens are accepted: signed by the keys at JWKSURL (RS*, PS*, ES*,
// EdDSA) or with the HS256 secret in the environment variable HS256SecretEnv — exactly one.
type JWT struct {
	// JWKSURL is the identity provider's JSON Web Key Set, fetched at start, every hour, and
	// when a token names a key it does not hold (a key rotation).
	JWKSURL string `yaml:"jwksURL"`
	// HS256SecretEnv names the environment variable holding a shared HS256 secret (at least 32
	// bytes); the secret itself is never in the file.
	HS256SecretEnv string `yaml:"hs256SecretEnv"`
	// Issuer must equal the token's iss claim. Required.
	Issuer string `yaml:"issuer"`
	// Audience must be one of the token's aud claim. Required.
	Audience string `yaml:"audience"`
	// Claims names the claims the principal is read from.
	Claims Claims `yaml:"claims"`
}

// Claims names the token claims a principal is read from; top-level claims only (a name with
// dots, such as https://example.com/roles, is one claim).
type Claims struct {
	// Subject is the claim naming the principal (default sub); a token without it is rejected.
	Subject string `yaml:"subject"`
	// Roles is the claim holding a role or a list of roles (default roles); a token without
	// it authenticates but holds no role, so every operation is forbidden.
	Roles string `yaml:"roles"`
	// Resources, when set, is the claim holding the resources the principal sees (a list or a
	// single id). A token without that claim sees no resource at all. Default: none, and
	// every principal sees every resource.
	Resources string `yaml:"resources"`
	// Agents, when set, is the claim holding the agents the principal may request approvals
	// for (a list or a single id). A token without that claim may request for no agent. Default:
	// none, and every principal may request for any agent.
	Agents string `yaml:"agents"`
}

// WithDefaults returns c with the default claim names filled in.
func (c Claims) WithDefaults() Claims {
	if c.Subject == "" {
		c.Subject = "sub"
	}
	if c.Roles == "" {
		c.Roles = "roles"
	}
	return c
}

// Problems returns everything wrong with the section, one "path: what is wrong" each, paths
// starting with at (such as "auth"). It reads nothing outside the section: the HS256 secret
// is checked by New.
func (c *Config) Problems(at string) []string {
	var p []string
	add := func(path, msg string) { p = append(p, path+": "+msg) }
	if len(c.Tokens) == 0 && c.JWT == nil && c.OIDC == nil {
		add(at, "needs tokens, jwt or oidc, or nobody can sign in (leave auth out and the server makes an admin token)")
	}
	subjects := map[string]int{}
	digests := map[string]int{}
	for i, t := range c.Tokens {
		ti := fmt.Sprintf("%s.tokens[%d]", at, i)
		if t.Subject == "" {
			add(ti+".subject", "is required")
		} else if j, dup := subjects[t.Subject]; dup {
			add(ti+".subject", fmt.Sprintf("%q is already the subject of tokens[%d]", t.Subject, j))
		} else {
			subjects[t.Subject] = i
		}
		if len(t.Role) == 0 {
			add(ti+".role", "at least one role is required (viewer, operator, approver, admin or a custom role)")
		}
		for j, r := range t.Role {
			if r == badRole {
				add(ti+".role", "must be a role name or a list of role names")
				break
			}
			if strings.TrimSpace(string(r)) == "" {
				add(fmt.Sprintf("%s.role[%d]", ti, j), "is empty")
			} else if strings.TrimSpace(string(r)) != string(r) {
				add(fmt.Sprintf("%s.role[%d]", ti, j), fmt.Sprintf("%q has spaces around it", r))
			}
		}
		if b, err := hex.DecodeString(t.SHA256); err != nil || len(b) != 32 {
			add(ti+".sha256", "must be the SHA-256 of the token in hex (64 characters), never the token itself")
		} else if j, dup := digests[strings.ToLower(t.SHA256)]; dup {
			add(ti+".sha256", fmt.Sprintf("is the same token as tokens[%d]", j))
		} else {
			digests[strings.ToLower(t.SHA256)] = i
		}
		if t.nullResources {
			add(ti+".resources", "has no value: write [] for no resource, or leave the key out for every resource")
		}
		for j, r := range t.Resources {
			if r == "" {
				add(fmt.Sprintf("%s.resources[%d]", ti, j), "is empty")
			}
		}
		if t.nullAgents {
			add(ti+".agents", "has no value: write [] for no agent, or leave the key out for any agent")
		}
		for j, a := range t.Agents {
			if a == "" {
				add(fmt.Sprintf("%s.agents[%d]", ti, j), "is empty")
			}
		}
	}
	if j := c.JWT; j != nil {
		ja := at + ".jwt"
		switch {
		case j.JWKSURL == "" && j.HS256SecretEnv == "":
			add(ja, "needs jwksURL (the identity provider's key set) or hs256SecretEnv (a shared secret)")
		case j.JWKSURL != "" && j.HS256SecretEnv != "":
			add(ja, "has both jwksURL and hs256SecretEnv; give one")
		case j.JWKSURL != "":
			if u, err := url.Parse(j.JWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add(ja+".jwksURL", fmt.Sprintf("%q is not an http(s) URL", j.JWKSURL))
			}
		}
		if j.Issuer == "" {
			add(ja+".issuer", "is required: without it tokens from any issuer signing with these keys would be accepted")
		}
		if j.Audience == "" {
			add(ja+".audience", "is required: without it tokens the issuer made for other applications would be accepted")
		}
	}
	if o := c.OIDC; o != nil {
		p = append(p, o.problems(at+".oidc")...)
	}
	return p
}
