// Runs as a child process so the benchmark's HTTP client does not share the
// server's thread: a real client is another process. Gets its job over IPC.
import { once } from 'node:events';
import { Agent, request } from 'node:http';

interface Job {
  url: string;
  token: string;
  paths: string[];
  body: string;
  concurrency: number;
}

const [job] = (await once(process, 'message')) as [Job];
const agent = new Agent({ keepAlive: true, maxSockets: job.concurrency });

function put(path: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(job.url + path, { method: 'PUT', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${job.token}` } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - started) : reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(job.body);
  });
}

const latencies: number[] = [];
let next = 0;
const started = performance.now();
await Promise.all(
  Array.from({ length: job.concurrency }, async () => {
    while (next < job.paths.length) latencies.push(await put(job.paths[next++]!));
  }),
);
process.send!({ elapsedMs: performance.now() - started, latencies });
agent.destroy();
process.disconnect();
