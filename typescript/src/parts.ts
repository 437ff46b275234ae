/**
 * Attachments sent with an answer: the `parts` of an InteractionResponse
 * (SPEC section 2), each `{"name", "media_type", "data": <base64>}`.
 *
 * The server checks them (a part is at most 10 MiB, a respond body with parts
 * at most 40 MiB: 413 past either; a bad media type or data: 422) and reduces
 * each name to a plain file name. The SDK sends what it is given and lets the
 * server decide, so a refusal is the server's `ApiError`. No file system is
 * touched here (the SDK runs on edge runtimes too): pass a `File`, or bytes.
 */

import { encodeBase64 } from "./bytes.js";
import type { InboundPart } from "./types.js";

/**
 * One attachment: `{ name, data, mediaType? }` (data as bytes, an
 * ArrayBuffer, text, or a Blob), or a `File` (its name and type are used).
 */
export type Attachment =
  | { name: string; data: Uint8Array | ArrayBuffer | string | Blob; mediaType?: string }
  | File;

// As `lev respond --attach` guesses (crates/lev-cli/src/cmd/respond.rs).
const BY_EXTENSION: Record<string, string> = {
  md: "text/markdown",
  markdown: "text/markdown",
  txt: "text/plain",
  log: "text/plain",
  text: "text/plain",
  csv: "text/csv",
  html: "text/html",
  htm: "text/html",
  json: "application/json",
  yaml: "application/yaml",
  yml: "application/yaml",
  toml: "application/toml",
  xml: "application/xml",
  pdf: "application/pdf",
  zip: "application/zip",
  gz: "application/gzip",
  tgz: "application/gzip",
  tar: "application/x-tar",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  svg: "image/svg+xml",
  diff: "text/x-diff",
  patch: "text/x-diff",
  ...Object.fromEntries(
    ["rs", "py", "js", "ts", "go", "c", "h", "sh", "rb", "java"].map((e) => [e, "text/plain"]),
  ),
};

/**
 * A media type from the name's extension, else `text/plain` for UTF-8 text
 * and `application/octet-stream` for the rest (as the CLI guesses).
 */
export function mediaType(name: string, data: Uint8Array): string {
  const dot = name.lastIndexOf(".");
  const found = dot >= 0 ? BY_EXTENSION[name.slice(dot + 1).toLowerCase()] : undefined;
  if (found !== undefined) return found;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(data);
    return "text/plain";
  } catch {
    return "application/octet-stream";
  }
}

async function bytesOf(data: Uint8Array | ArrayBuffer | string | Blob): Promise<Uint8Array> {
  if (typeof data === "string") return new TextEncoder().encode(data);
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (typeof Blob !== "undefined" && data instanceof Blob) {
    return new Uint8Array(await data.arrayBuffer());
  }
  throw new TypeError("attachments: expected the data as bytes, an ArrayBuffer, text or a Blob");
}

/** The part to send for one attachment. */
export async function inboundPart(attachment: Attachment): Promise<InboundPart> {
  if (typeof File !== "undefined" && attachment instanceof File) {
    const raw = new Uint8Array(await attachment.arrayBuffer());
    const name = attachment.name || "attachment";
    return {
      name,
      media_type: attachment.type || mediaType(name, raw),
      data: encodeBase64(raw),
    };
  }
  const a = attachment as { name: unknown; data: unknown; mediaType?: unknown };
  if (typeof a !== "object" || a === null || typeof a.name !== "string") {
    throw new TypeError("attachments: expected { name, data, mediaType? } or a File");
  }
  const raw = await bytesOf(a.data as Uint8Array);
  return {
    name: a.name,
    media_type: typeof a.mediaType === "string" ? a.mediaType : mediaType(a.name, raw),
    data: encodeBase64(raw),
  };
}

export async function inboundParts(attachments: Iterable<Attachment>): Promise<InboundPart[]> {
  if (!(Symbol.iterator in Object(attachments)) || typeof attachments === "string") {
    throw new TypeError("attachments: expected a list of attachments");
  }
  return Promise.all([...attachments].map(inboundPart));
}
