package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// gqlClient posts GraphQL operations to one server over keep-alive connections.
type gqlClient struct {
	url  string
	http *http.Client
}

func newGQLClient(base string) *gqlClient {
	return &gqlClient{url: base + "/graphql", http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
}

// do runs one operation and decodes its data into out (when not nil); a GraphQL error is an error.
func (c *gqlClient) do(ctx context.Context, query string, vars map[string]any, out any) error {
	_, err := c.timed(ctx, query, vars, out)
	return err
}

// timed is do that also returns how long the server took to answer: from sending the request
// until the last byte of the answer is read, before the load program decodes it.
func (c *gqlClient) timed(ctx context.Context, query string, vars map[string]any, out any) (time.Duration, error) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	var r struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return took, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, raw)
	}
	if len(r.Errors) > 0 {
		return took, fmt.Errorf("%s (%v)", r.Errors[0].Message, r.Errors[0].Extensions["code"])
	}
	if out != nil {
		return took, json.Unmarshal(r.Data, out)
	}
	return took, nil
}
