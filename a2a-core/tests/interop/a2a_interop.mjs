// Independent implementation of the A2A-Signature checks with Node's built-in crypto, used by a2a-core/tests/interop.rs.
// Nothing here is shared with the Rust code: base64url, RFC 8785 canonical JSON and the coverage rules are written
// again from the specification (spec/PROTOCOL.md, INT-*, JWS-*).
//
//   node a2a_interop.mjs verify-vectors <signatures.json>   verify every vector whose outcome depends on ECDSA/coverage
//   node a2a_interop.mjs sign < request.json                 generate a P-256 key and sign a request, print JSON
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';

const b64u = (buf) => Buffer.from(buf).toString('base64url');
const unb64u = (s) => {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error('not base64url');
  return Buffer.from(s, 'base64url');
};

// RFC 8785: JSON.stringify gives ECMAScript number and string serialisation; members sorted by UTF-16 code units
// (the default order of Array.prototype.sort on strings).
function jcs(v) {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error('non-finite number');
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
  return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}';
}

const sha256b64u = (bytes) => b64u(createHash('sha256').update(bytes).digest());

function bodyDigest(coverage, body) {
  if (coverage === 'header_only') return undefined;
  if (coverage === 'payload_hash') return sha256b64u(Buffer.from(jcs(JSON.parse(body.toString('utf8'))), 'utf8'));
  if (coverage === 'full_payload') return sha256b64u(body);
  throw new Error('unknown coverage ' + coverage);
}

function coveredHeaders(headers) {
  const out = {};
  for (const [name, value] of headers) {
    const n = name.toLowerCase();
    if ((n.startsWith('a2a-') && n !== 'a2a-signature') || n === 'idempotency-key') {
      if (n in out) throw new Error('duplicate ' + n);
      out[n] = value.replace(/^[ \t]+|[ \t]+$/g, '');
    }
  }
  return out;
}

function verifyEs256(jwk, signingInput, sig) {
  try {
    const key = createPublicKey({ key: jwk, format: 'jwk' });
    return verify('sha256', Buffer.from(signingInput, 'ascii'), { key, dsaEncoding: 'ieee-p1363' }, sig);
  } catch {
    return false;
  }
}

function verifyVectors(path) {
  const file = JSON.parse(readFileSync(path, 'utf8'));
  let validChecked = 0, forgedRejected = 0;
  const failures = [];
  for (const group of file.testGroups) {
    for (const t of group.tests) {
      const isValid = t.result === 'valid';
      const isForged = t.result === 'invalid' && t.error === 'signature_invalid';
      if (!isValid && !isForged) continue;
      const token = t.input.signature;
      const parts = token.split('.');
      const header = JSON.parse(unb64u(parts[0]).toString('utf8'));
      const claims = JSON.parse(unb64u(parts[1]).toString('utf8'));
      const keyId = header.kid.slice(header.kid.indexOf('#') + 1);
      const jwk = group.keySet[keyId];
      const ok = header.alg === 'ES256' && verifyEs256(jwk, parts[0] + '.' + parts[1], unb64u(parts[2]));
      if (isForged) {
        if (ok) failures.push(`tcId ${t.tcId}: forged signature verified in Node`);
        else forgedRejected++;
        continue;
      }
      if (!ok) { failures.push(`tcId ${t.tcId}: valid signature does not verify in Node`); continue; }
      const body = t.input.body_b64 !== undefined ? unb64u(t.input.body_b64) : Buffer.from(t.input.body ?? '', 'utf8');
      const mi = claims.message_integrity;
      const digest = bodyDigest(mi.coverage, body);
      if (digest !== mi.body) failures.push(`tcId ${t.tcId}: body digest ${digest} != signed ${mi.body}`);
      const covered = coveredHeaders(t.input.headers);
      if (jcs(covered) !== jcs(mi.headers)) failures.push(`tcId ${t.tcId}: covered headers differ: ${jcs(covered)}`);
      if (claims.htm !== t.input.method || claims.htu !== t.input.target) failures.push(`tcId ${t.tcId}: htm/htu differ`);
      validChecked++;
    }
  }
  console.log(JSON.stringify({ validChecked, forgedRejected, failures }));
  process.exit(failures.length === 0 ? 0 : 1);
}

function signRequest() {
  const req = JSON.parse(readFileSync(0, 'utf8'));
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const body = Buffer.from(req.body, 'utf8');
  const mi = { hash: 'sha256', key_id: req.key_id, coverage: req.coverage, headers: coveredHeaders(req.headers) };
  const digest = bodyDigest(req.coverage, body);
  if (digest !== undefined) mi.body = digest;
  const claims = {
    iss: req.iss, aud: req.aud, iat: req.now, exp: req.now + 120, jti: b64u(randomBytes(16)),
    htm: req.method, htu: req.target, message_integrity: mi,
  };
  const header = { alg: 'ES256', kid: `${req.iss}#${req.key_id}`, typ: 'a2a-sig+jwt' };
  // Deliberately not canonical: the receiver verifies the bytes it received, whatever their member order.
  const input = b64u(JSON.stringify(header)) + '.' + b64u(JSON.stringify(claims));
  const sig = sign('sha256', Buffer.from(input, 'ascii'), { key: privateKey, dsaEncoding: 'ieee-p1363' });
  console.log(JSON.stringify({ signature: input + '.' + b64u(sig), jwk: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y } }));
}

const [mode, arg] = process.argv.slice(2);
if (mode === 'verify-vectors') verifyVectors(arg);
else if (mode === 'sign') signRequest();
else { console.error('usage: a2a_interop.mjs verify-vectors FILE | sign < request.json'); process.exit(2); }
