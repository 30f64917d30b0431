// A fault-injecting gRPC proxy in front of a real engram server, for the retry tests: it forwards each call's
// bytes and metadata upstream, and a test's `plan` can fail an attempt instead, before or after forwarding it
// (the second is the "unknown outcome" a retry must handle: the server applied the call, the answer was lost).
import * as grpc from "@grpc/grpc-js";
import { RPCS, type RpcName } from "engram-grpc";

/** What the proxy does with one attempt. */
/** "hang": never answer (the client's deadline ends the attempt). */
export type Step = "forward" | "hang" | { fail: grpc.status; afterForwarding?: boolean };

/** One attempt the proxy saw: the RPC, the decoded request and the metadata the client sent. */
export interface Seen {
  method: RpcName;
  request: Record<string, unknown>;
  metadata: Record<string, string>;
}

export interface Proxy {
  address: string;
  seen: Seen[];
  /** Forgets what it saw and restarts the attempt counts. */
  reset(): void;
  close(): Promise<void>;
}

const identity = (b: Buffer): Buffer => b;

/** Starts the proxy on a free port; `plan(method, attempt)` (attempt counts from 1 per RPC) picks each step. */
export async function startProxy(upstream: string, plan: (method: RpcName, attempt: number) => Step): Promise<Proxy> {
  const client = new grpc.Client(upstream, grpc.credentials.createInsecure());
  const server = new grpc.Server();
  const seen: Seen[] = [];
  const counts = new Map<RpcName, number>();
  const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of Object.keys(RPCS) as RpcName[]) {
    const rpc = RPCS[method];
    definition[method] = {
      path: rpc.path, requestStream: false, responseStream: false, originalName: method,
      requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity,
    };
    handlers[method] = (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      const attempt = (counts.get(method) ?? 0) + 1;
      counts.set(method, attempt);
      const metadata = Object.fromEntries(Object.entries(call.metadata.getMap()).map(([k, v]) => [k, String(v)]));
      seen.push({ method, request: rpc.requestDeserialize(call.request) as unknown as Record<string, unknown>, metadata });
      const step = plan(method, attempt);
      const fail = (code: grpc.status): void => callback({ code, details: `injected by the test proxy (${method} #${attempt})` });
      if (step === "hang") return;
      if (step !== "forward" && !step.afterForwarding) {
        fail(step.fail);
        return;
      }
      client.makeUnaryRequest(rpc.path, identity, identity, call.request, call.metadata.clone(),
        { deadline: call.getDeadline() }, (error, reply) => {
          if (step !== "forward") fail(step.fail);
          else if (error) callback(error);
          else callback(null, reply);
        });
    };
  }
  server.addService(definition, handlers);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound)));
  });
  return {
    address: `127.0.0.1:${port}`,
    seen,
    reset: () => {
      seen.length = 0;
      counts.clear();
    },
    close: () => new Promise<void>((resolve) => {
      client.close();
      server.tryShutdown(() => resolve());
    }),
  };
}
