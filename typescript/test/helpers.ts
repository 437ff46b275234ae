/** Helpers the tests share: the repository root, the lev binary, a `lev serve`. */

import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (tests run from dist/test/). */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
