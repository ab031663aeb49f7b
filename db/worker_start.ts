/**
 * How long a database worker (the history writer's, db/batch_executor.ts; the admin reader's,
 * db/worker_reads.ts) may take to answer its first message, opening the database. Its start
 * loads the SQLite driver, seconds at most with a cold module cache; one that
 * has not answered by then never will (it lost the message, or died before it could say), and
 * whatever waits for it would wait forever: past the bound it counts as a worker that could not
 * start, and its work goes where such a worker's goes.
 */
export const WORKER_START_BOUND_MS = 60_000;
