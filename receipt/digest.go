package receipt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/gowebpki/jcs"
)

// DigestPrefix starts every argsDigest: the hash that follows is named, so that a verifier
// never guesses it, and another one could follow it some day.
const DigestPrefix = "sha256:"

// ArgsDigest is the argsDigest of a receipt: "sha256:" and the hex SHA-256 of the RFC 8785 (JCS)
// canonical form of args. JCS and not Interlock's own canonical form (agent.CanonicalJSON, which
// keeps Go's HTML escaping and the numbers as written), because the service that verifies a
// receipt computes the digest of the arguments it received with its own JCS library, in any
// language: JCS fixes key order, string escapes and number formatting the same way everywhere.
// args must be JSON; its duplicate keys, if any, were refused before it was stored.
func ArgsDigest(args []byte) (string, error) {
	canonical, err := jcs.Transform(args)
	if err != nil {
		return "", fmt.Errorf("canonical form (RFC 8785) of the arguments: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return DigestPrefix + hex.EncodeToString(sum[:]), nil
}
