// BullMQ under the workload of `sluice bench jobs`: no-op jobs enqueued in
// batches (`addBulk`, one round trip each), then burnt down by one worker
// with the same concurrency; jobs/s for both. Completed jobs are kept, as
// Sluice keeps them (until retention).
//
//   node bench.mjs [--jobs 50000] [--batch 1000] [--concurrency 100] [--redis redis://127.0.0.1:6379] [--json]
//
// See README.md for the two Redis settings the figures are taken with.

import { Queue, Worker } from "bullmq";
import IORedis from "ioredis";

function options(argv) {
  const o = { jobs: 50_000, batch: 1_000, concurrency: 100, redis: "redis://127.0.0.1:6379", json: false };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (flag === "--json") {
      o.json = true;
      continue;
    }
    const value = argv[++i];
    const key = flag.replace(/^--/, "");
    if (!(key in o) || value === undefined) {
      throw new Error(`unknown or incomplete option ${flag} (see the head of bench.mjs)`);
    }
    if (key === "redis") {
      o.redis = value;
    } else {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1) throw new Error(`--${key} must be a positive integer, got ${value}`);
      o[key] = n;
    }
  }
  return o;
}

// A client of its own for the queue and for the worker (BullMQ 6 takes
// built clients in an ES module). Workers block on Redis: BullMQ requires
// maxRetriesPerRequest null.
function connection(url) {
  return new IORedis(url, { maxRetriesPerRequest: null });
}

async function main() {
  const o = options(process.argv.slice(2));
  const name = `sluice-bench-${process.pid}`;
  const queueClient = connection(o.redis);
  const queue = new Queue(name, { connection: queueClient });
  await queue.obliterate({ force: true });

  let start = process.hrtime.bigint();
  for (let n = 0; n < o.jobs; n += o.batch) {
    const batch = [];
    for (let i = n; i < Math.min(n + o.batch, o.jobs); i++) batch.push({ name: "noop", data: { i } });
    await queue.addBulk(batch);
  }
  const enqueueSeconds = Number(process.hrtime.bigint() - start) / 1e9;

  let completed = 0;
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  start = process.hrtime.bigint();
  const workerClient = connection(o.redis);
  const worker = new Worker(name, async () => null, { connection: workerClient, concurrency: o.concurrency });
  worker.on("completed", () => {
    if (++completed === o.jobs) done();
  });
  worker.on("failed", (job, err) => console.error(`job ${job?.id} failed: ${err}`));
  await finished;
  const burnSeconds = Number(process.hrtime.bigint() - start) / 1e9;
  await worker.close();
  const counts = await queue.getJobCounts("completed");
  await queue.obliterate({ force: true });
  await queue.close();
  queueClient.disconnect();
  workerClient.disconnect();

  const result = {
    backend: "bullmq",
    jobs: o.jobs,
    batch: o.batch,
    concurrency: o.concurrency,
    enqueue_jobs_per_second: Math.round(o.jobs / enqueueSeconds),
    enqueue_seconds: Number(enqueueSeconds.toFixed(3)),
    burn_jobs_per_second: Math.round(o.jobs / burnSeconds),
    burn_seconds: Number(burnSeconds.toFixed(3)),
    completed: counts.completed,
  };
  if (o.json) {
    console.log(JSON.stringify(result));
  } else {
    console.log(
      `bullmq, ${o.jobs} no-op jobs: enqueue ${result.enqueue_jobs_per_second} jobs/s (batches of ${o.batch}), ` +
        `processing ${result.burn_jobs_per_second} jobs/s (one worker, concurrency ${o.concurrency}), ${result.completed} completed`,
    );
  }
}

main().catch((e) => {
  console.error(`bench.mjs: ${e.message}`);
  process.exit(1);
});
