package runs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"interlock/runtype"
	"unicode/utf8"
)

// maxIdempotencyKeyLength bounds a client's idempotency key (a UUID is 36 characters).
const maxIdempotencyKeyLength = 255

// idempotency is the stored form of a request's idempotency key (nil without one): the key
// belongs to whoever sent it — the principal's recorded subject, or nobody for System and
// Anonymous — so two principals' equal keys are two keys; request is what the request asked,
// to tell a retry from another request reusing the key.
func idempotency(ctx context.Context, key *string, request any) (*Idempotency, error) {
	if key == nil {
		return nil, nil
	}
	if *key == "" || utf8.RuneCountInString(*key) > maxIdempotencyKeyLength {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "idempotencyKey must be 1 to %d characters long", maxIdempotencyKeyLength)
	}
	var who string
	if s := runtype.PrincipalFrom(ctx).Recorded(); s != nil {
		who = *s
	}
	// The subject's length first, so that no other subject and key make the same bytes.
	keyHash := sha256.Sum256(fmt.Appendf(nil, "%d:%s%s", len(who), who, *key))
	b, err := json.Marshal(request)
	if err != nil {
		return nil, err
	}
	reqHash := sha256.Sum256(b)
	return &Idempotency{KeyHash: hex.EncodeToString(keyHash[:]), RequestHash: hex.EncodeToString(reqHash[:])}, nil
}

// repeated answers a request whose idempotency key was claimed before (err is a
// *DuplicateRequest; ok false otherwise): the same request gets the run it made, as stored now,
// and another request reusing the key BAD_USER_INPUT.
func (s *Service) repeated(ctx context.Context, key string, err error) (rn *runtype.Run, ok bool, _ error) {
	var dup *DuplicateRequest
	if !errors.As(err, &dup) {
		return nil, false, nil
	}
	if !dup.SameRequest {
		return nil, true, runtype.Errorf(runtype.CodeBadUserInput, "idempotencyKey %q was used for another request: a new request needs a new key", key)
	}
	r, err := s.visible(ctx, dup.RunID)
	return r, true, err
}
