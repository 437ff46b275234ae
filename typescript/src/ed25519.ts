/**
 * Strict Ed25519, as curve25519-dalek's `verify_strict` (which the Rust
 * verifier uses): a public key that is a small-order point is refused when it
 * is loaded; a signature whose `R` is small-order, whose `s` is not below the
 * group order, or that does not satisfy the cofactorless equation
 * `[s]B = R + [k]A` byte for byte, is refused. And it must also pass
 * `@noble/curves`' own RFC 8032 verification with `zip215: false`
 * (canonical encodings only, small-order keys refused).
 *
 * Why not WebCrypto's Ed25519: WebCrypto (and Node's OpenSSL behind it) is
 * not specified to refuse small-order public keys or small-order `R`; under
 * the small-order identity key a forged "signature" verifies there (the
 * `weak_key` test vector is one). Batch or ZIP-215 verification is never
 * used: both accept forgeries under such keys.
 */

import { ed25519 } from "@noble/curves/ed25519.js";
import { sha512 } from "@noble/hashes/sha2.js";
import { bytesEqual, concat, leToBigInt } from "./bytes.js";

const P = 2n ** 255n - 19n;
/** The order of the prime subgroup. */
export const L = 2n ** 252n + 27742317777372353535851937790883648493n;

function mod(a: bigint, m: bigint): bigint {
  const r = a % m;
  return r < 0n ? r + m : r;
}

function pow(base: bigint, exp: bigint, m: bigint): bigint {
  let r = 1n;
  let b = mod(base, m);
  let e = exp;
  while (e > 0n) {
    if (e & 1n) r = (r * b) % m;
    b = (b * b) % m;
    e >>= 1n;
  }
  return r;
}

const D = mod(-121665n * pow(121666n, P - 2n, P), P);
const SQRT_M1 = pow(2n, (P - 1n) / 4n, P);

export type Affine = { x: bigint; y: bigint };

/**
 * The affine point a 32-byte encoding names, or null when it names none.
 * As curve25519-dalek decompresses: `y` is reduced modulo p, and `x = 0`
 * with the sign bit set decodes to `x = 0`.
 */
export function decompress(raw: Uint8Array): Affine | null {
  if (raw.length !== 32) return null;
  const n = leToBigInt(raw);
  const sign = n >> 255n;
  const y = mod(n & ((1n << 255n) - 1n), P);
  const u = mod(y * y - 1n, P);
  const v = mod(D * y * y + 1n, P);
  const x2 = mod(u * pow(v, P - 2n, P), P);
  let x = pow(x2, (P + 3n) / 8n, P);
  if (mod(x * x - x2, P) !== 0n) x = mod(x * SQRT_M1, P);
  if (mod(x * x - x2, P) !== 0n) return null;
  if (x !== 0n && (x & 1n) !== sign) x = P - x;
  return { x, y };
}

/** Whether the point has small order (8 times it is the identity). */
export function isSmallOrder(pt: Affine): boolean {
  return ed25519.Point.fromAffine(pt).isSmallOrder();
}

/** Whether the point is on the curve, in the prime-order subgroup or not. */
function point(pt: Affine) {
  return ed25519.Point.fromAffine(pt);
}

/**
 * `verify_strict` over `message` by the key `publicKey` (its 32 bytes as
 * given, and its decompressed point, which the caller has checked is not
 * small-order).
 */
export function verifyStrict(
  publicKey: Uint8Array,
  key: Affine,
  message: Uint8Array,
  sig: Uint8Array,
): boolean {
  if (sig.length !== 64) return false;
  const rBytes = sig.subarray(0, 32);
  const r = decompress(rBytes);
  if (r === null || isSmallOrder(r)) return false;
  const s = leToBigInt(sig.subarray(32));
  if (s >= L) return false;
  const k = mod(leToBigInt(sha512(concat(rBytes, publicKey, message))), L);
  let expected: Uint8Array;
  try {
    const sB = ed25519.Point.BASE.multiplyUnsafe(s);
    const kA = point(key).multiplyUnsafe(k);
    expected = sB.subtract(kA).toBytes();
  } catch {
    return false;
  }
  if (!bytesEqual(expected, rBytes)) return false;
  try {
    return ed25519.verify(sig, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}
