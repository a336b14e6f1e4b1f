package receipt_test

import (
	"crypto"
	"encoding/base64"
)

const crypto256 = crypto.SHA256

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
