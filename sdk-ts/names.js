// openmcp's naming algorithms: the stable UUID of a set of names, tenant
// namespaces, and the shortening of long names, bit for bit those of
// controller-utils and openmcp-operator (and of the Rust and Go SDKs, whose
// test vectors names.test.js repeats). Lengths are in bytes of UTF-8, as
// there (Kubernetes names are ASCII, where bytes and characters agree).
// QuickJS, which runs a plugin, has no TextEncoder: UTF-8 is written here.
import { shake128 } from "@noble/hashes/sha3.js";
import { base32nopad } from "@scure/base";

/** Kubernetes' limit for names and label values. */
export const MAX_LENGTH = 63;
/** What every tenant namespace on the platform starts with. */
export const TENANT_NAMESPACE_PREFIX = "mcp--";

// The UTF-8 bytes of each character of `input`.
function utf8(input) {
  const out = [];
  for (const character of input) {
    const c = character.codePointAt(0);
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

// The longest prefix of `input` of at most `limit` UTF-8 bytes.
function prefix(input, limit) {
  let length = 0;
  let out = "";
  for (const character of input) {
    length += utf8(character).length;
    if (length > limit) break;
    out += character;
  }
  return out;
}

const hash = (input, bytes) => shake128(utf8(input), { dkLen: bytes });
const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

export function k8sNameUUID(...parts) {
  if (parts.join("") === "") throw new Error("at least one name must be non-empty to derive a stable name");
  const h = hash(parts.join("/"), 16);
  h[6] = (h[6] & 0x0f) | 0x80; // version 8
  h[8] = (h[8] & 0x3f) | 0x80; // RFC 4122 variant
  const x = hex(h);
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

export function tenantNamespace(name, namespace) {
  return TENANT_NAMESPACE_PREFIX + k8sNameUUID(namespace, name);
}

export function shorten(name, limit) {
  if (utf8(name).length <= limit) return name;
  // RFC 4648 base32 without padding, in lower case.
  const suffix = `--${base32nopad.encode(hash(name, 5)).toLowerCase()}`;
  const keep = Math.max(0, limit - suffix.length);
  return prefix(name, keep).replace(/[-.]+$/, "") + suffix;
}

export function accessRequestName(controller, instance, suffix) {
  const base = `${controller.toLowerCase()}--${instance.toLowerCase()}`;
  return `${shorten(base, Math.max(0, MAX_LENGTH - suffix.length - 2))}--${suffix}`;
}

export const labelValue = (value) => shorten(value, MAX_LENGTH);

export const prefixedCopyName = (provider, source) => shorten(`sp-${provider}-${source}`, MAX_LENGTH);
