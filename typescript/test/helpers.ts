/**
 * Helpers the tests share: the repository root, and a real `lev serve` on a
 * scratch data dir and a free port (`LEV_BIN`, else target/debug/lev). A
 * missing binary fails the tests; it never skips them.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, type ResponseInput, type Role } from "../src/index.js";

/** The repository root (tests run from typescript/dist/test/). */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

export function levBin(): string {
  const path = process.env.LEV_BIN || join(ROOT, "target", "debug", "lev");
  if (!existsSync(path)) {
    throw new Error(
      `no lev binary at ${path}: build it with \`cargo build -p lev-cli\` or set LEV_BIN`,
    );
  }
  return path;
}

export function uid(prefix = "s"): string {
  return `${prefix}-${randomBytes(6).toString("hex")}`;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** One `lev serve`. `stop()` then `start()` restarts it on the same data dir and port. */
export class Server {
  url = "";
  admin = "";
  listen = "127.0.0.1:0";
  proc: ChildProcess | null = null;
  lines: string[] = [];
  readonly dataDir: string;
  private readonly ownsDir: boolean;

  private constructor(
    dataDir: string | undefined,
    readonly extra: string[],
  ) {
    this.ownsDir = dataDir === undefined;
    this.dataDir = dataDir ?? join(mkdtempSync(join(tmpdir(), "lev-ts-")), "data");
  }

  static async start(opts: { dataDir?: string; extra?: string[] } = {}): Promise<Server> {
    const s = new Server(opts.dataDir, opts.extra ?? []);
    await s.start();
    return s;
  }

  async start(): Promise<void> {
    const env = { ...process.env };
    delete env.LEV_DATABASE_URL;
    delete env.LEV_URL;
    delete env.LEV_TOKEN;
    const proc = spawn(
      levBin(),
      ["serve", "--listen", this.listen, "--data-dir", this.dataDir, ...this.extra],
      { stdio: ["ignore", "ignore", "pipe"], env },
    );
    this.proc = proc;
    this.url = await new Promise<string>((resolve, reject) => {
      let buf = "";
      const timer = setTimeout(
        () => reject(new Error(`lev serve did not start:\n${this.lines.join("")}`)),
        60_000,
      );
      proc.stderr?.setEncoding("utf8");
      proc.stderr?.on("data", (chunk: string) => {
        buf += chunk;
        let at = buf.indexOf("\n");
        while (at >= 0) {
          const line = buf.slice(0, at + 1);
          buf = buf.slice(at + 1);
          this.lines.push(line);
          if (line.startsWith("lev: listening on ")) {
            clearTimeout(timer);
            resolve(line.slice("lev: listening on ".length).trim());
          }
          at = buf.indexOf("\n");
        }
      });
      proc.on("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`lev serve exited (${code}):\n${this.lines.join("")}`));
      });
    });
    this.listen = new URL(this.url).host;
    this.admin = readFileSync(join(this.dataDir, "admin.token"), "utf8").trim();
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    this.proc = null;
    if (proc === null || proc.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once("exit", () => resolve());
      proc.kill("SIGKILL");
    });
  }

  async close(): Promise<void> {
    await this.stop();
    if (this.ownsDir) rmSync(dirname(this.dataDir), { recursive: true, force: true });
  }

  client(token?: string): Client {
    return new Client(this.url, token ?? this.admin);
  }

  async token(role: Role, opts: { caller?: string; sessions?: string[] } = {}): Promise<string> {
    const sessions = opts.sessions ?? (role === "operator" ? ["*"] : undefined);
    const info = await this.client().createToken(uid(role), role, {
      ...(opts.caller !== undefined ? { caller: opts.caller } : {}),
      ...(sessions !== undefined ? { sessions } : {}),
    });
    return info.token as string;
  }
}

/**
 * A person answering through the HTTP API: the first pending interaction of
 * the session, once it is there. Resolves to its id.
 */
export async function answerWhenPending(
  approver: Client,
  sessionId: string,
  response: ResponseInput,
  timeoutMs = 30_000,
): Promise<string> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const page = await approver.listInteractions({ status: "pending", sessionId });
    const first = page.items[0];
    if (first !== undefined) {
      await approver.respond(first.request.id, response);
      return first.request.id;
    }
    await sleep(50);
  }
  throw new Error(`nothing pending in ${sessionId} within ${timeoutMs} ms`);
}

/** The first pending interaction of the session, once it is there. */
export async function pendingIn(
  approver: Client,
  sessionId: string,
  timeoutMs = 30_000,
): Promise<string> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const page = await approver.listInteractions({ status: "pending", sessionId });
    const first = page.items[0];
    if (first !== undefined) return first.request.id;
    await sleep(50);
  }
  throw new Error(`nothing pending in ${sessionId} within ${timeoutMs} ms`);
}
