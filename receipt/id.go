package receipt

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// ID names a stored receipt in the audit trail: its jti claim (the ID of Claims, unique per
// receipt), which a tool's service that logs the receipts it was shown can match. The payload
// is read without checking the signature: the receipt is the server's own, as stored. A receipt
// whose payload cannot be read (none are, but the column is text) is named by "sha256:" and the
// hex SHA-256 of the compact JWS, which still names it uniquely.
func ID(compact string) string {
	parts := strings.Split(compact, ".")
	if len(parts) == 3 {
		if payload, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			var c struct {
				ID string `json:"jti"`
			}
			if json.Unmarshal(payload, &c) == nil && c.ID != "" {
				return c.ID
			}
		}
	}
	sum := sha256.Sum256([]byte(compact))
	return DigestPrefix + hex.EncodeToString(sum[:])
}
