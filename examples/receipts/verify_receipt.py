"""Verify an Interlock receipt in the service a tool calls (PyJWT: Debian's python3-jwt, or
pip install "pyjwt[crypto]"): the signature with the keys Interlock publishes, the issuer, the
expiry, and that it approved exactly the arguments this service received.

    INTERLOCK_URL=http://localhost:8080 python3 verify_receipt.py RECEIPT TOOL 'ARGS'
"""
import hashlib
import json
import math
import os
import sys

import jwt

URL = os.environ.get("INTERLOCK_URL", "http://localhost:8080")
ISSUER = os.environ.get("INTERLOCK_ISSUER", "interlock")  # the server's --receipt-issuer
# Cached, and fetched again when a receipt names a key not seen yet (Interlock rotates keys).
KEYS = jwt.PyJWKClient(URL + "/.well-known/jwks.json")


def verify_receipt(receipt, tool, args):
    """Returns the receipt's claims when Interlock signed it for a call of `tool` with exactly
    `args` and it has not expired; raises otherwise. A service may also check runId and
    toolCallId against the request, and remember each jti until its exp to refuse a replay."""
    key = KEYS.get_signing_key_from_jwt(receipt)
    claims = jwt.decode(receipt, key.key, algorithms=["EdDSA"], issuer=ISSUER,
                        options={"require": ["iss", "exp", "jti"]})
    digest = "sha256:" + hashlib.sha256(jcs(args).encode()).hexdigest()
    if claims["decision"] != "APPROVED" or claims["tool"] != tool or claims["argsDigest"] != digest:
        raise ValueError(f"the receipt does not approve {tool} with these arguments")
    return claims


def jcs(value):
    """The RFC 8785 (JCS) canonical form of a parsed JSON value: the form Interlock hashed."""
    if isinstance(value, dict):  # keys in UTF-16 code unit order
        items = sorted(value.items(), key=lambda kv: kv[0].encode("utf-16-be"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + jcs(v) for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return es6_number(float(value))  # JSON numbers are IEEE doubles
    return json.dumps(value, ensure_ascii=False)  # strings, true, false, null


def es6_number(f):
    """A double as JavaScript's Number.prototype.toString writes it (RFC 8785, 3.2.2.3)."""
    if not math.isfinite(f):
        raise ValueError("JSON has no NaN or Infinity")
    if f == 0:
        return "0"
    mantissa, _, exp = repr(abs(f)).partition("e")  # repr: the shortest digits that round-trip
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    n = len(whole) + int(exp or 0) - (len(whole + frac) - len(digits))  # value = 0.digits × 10^n
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * -n + digits
    else:
        e = n - 1
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return "-" + s if f < 0 else s


if __name__ == "__main__":
    receipt, tool, args = sys.argv[1:4]
    claims = verify_receipt(receipt, tool, json.loads(args))
    print("VERIFIED", claims["tool"], "of run", claims["runId"], "call", claims["toolCallId"],
          "approved by", claims["decidedBy"] or "policy")
