// Verify an Interlock receipt in the service a tool calls (TypeScript, jose): the signature with
// the keys Interlock publishes, the issuer, the expiry, and that it approved exactly the arguments
// this service received.
//
//   npm ci && npx tsc && INTERLOCK_URL=http://localhost:8080 node verify-receipt.js RECEIPT TOOL 'ARGS'
import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { createRemoteJWKSet, jwtVerify } from "jose";

const url = process.env.INTERLOCK_URL ?? "http://localhost:8080";
const issuer = process.env.INTERLOCK_ISSUER ?? "interlock"; // the server's --receipt-issuer
// Cached, and fetched again when a receipt names a key not seen yet (Interlock rotates keys).
const keys = createRemoteJWKSet(new URL("/.well-known/jwks.json", url));

export type Receipt = {
  iss: string; runId: string; toolCallId: string; agentId: string; tool: string; argsDigest: string;
  decision: "APPROVED"; decidedBy: string | null; decidedAt: string; iat: number; exp: number; jti: string;
};

// verifyReceipt returns the receipt's claims when Interlock signed it for a call of `tool` with
// exactly `args` and it has not expired; it throws otherwise. A service may also check runId and
// toolCallId against the request, and remember each jti until its exp to refuse a replay.
export async function verifyReceipt(receipt: string, tool: string, args: unknown): Promise<Receipt> {
  const { payload } = await jwtVerify(receipt, keys, { issuer, algorithms: ["EdDSA"], requiredClaims: ["exp", "jti"] });
  const claims = payload as unknown as Receipt;
  // RFC 8785 (JCS): the canonical form Interlock hashed, whatever order or spacing args came in.
  const digest = "sha256:" + createHash("sha256").update(canonicalize(args) ?? "").digest("hex");
  if (claims.decision !== "APPROVED" || claims.tool !== tool || claims.argsDigest !== digest) {
    throw new Error(`the receipt does not approve ${tool} with these arguments`);
  }
  return claims;
}

const [receipt, tool, args] = process.argv.slice(2);
const claims = await verifyReceipt(receipt, tool, JSON.parse(args));
console.log("VERIFIED", claims.tool, "of run", claims.runId, "call", claims.toolCallId, "approved by", claims.decidedBy ?? "policy");
