"""The SQL of the PostgreSQL call log (postgres.py): its schema and every statement its writer thread,
readers and listener run. Why each statement is shaped as it is lives beside it; the store's guarantees
are in postgres.py's docstring."""

SCHEMA = """
SELECT pg_advisory_xact_lock(7319040113);  -- replicas starting together create the schema once
CREATE TABLE IF NOT EXISTS calls (
  rollout_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  body BYTEA NOT NULL,
  seq BIGSERIAL,
  PRIMARY KEY (rollout_id, idx)
);
CREATE TABLE IF NOT EXISTS rollouts (
  rollout_id TEXT PRIMARY KEY,
  body BYTEA NOT NULL,
  closed BOOLEAN NOT NULL DEFAULT false,
  tainted BOOLEAN NOT NULL DEFAULT false,
  seq BIGSERIAL
);
CREATE TABLE IF NOT EXISTS index_leases (
  rollout_id TEXT PRIMARY KEY,
  stop INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS blobs (
  sha256 TEXT PRIMARY KEY,
  media_type TEXT NOT NULL,
  size INTEGER NOT NULL,
  data BYTEA NOT NULL
);
ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE TABLE IF NOT EXISTS gateway_flow (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq BIGINT NOT NULL DEFAULT 0,
  paused BOOLEAN NOT NULL DEFAULT false,
  policy_version BIGINT NOT NULL DEFAULT 0
);
INSERT INTO gateway_flow (id) VALUES (1) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS rollout_log_bytes (
  rollout_id TEXT PRIMARY KEY,
  bytes BIGINT NOT NULL,
  noted BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS call_conflicts (
  rollout_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  body BYTEA NOT NULL,
  seen_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
"""
INSERT_CALLS = """INSERT INTO calls (rollout_id, idx, body)
SELECT * FROM unnest(%s::text[], %s::int[], %s::bytea[]) ON CONFLICT DO NOTHING"""
# Run only when the insert above skipped a row: keys already held by OTHER bytes are kept aside.
DIVERT_CONFLICTS = """INSERT INTO call_conflicts (rollout_id, idx, body)
SELECT u.r, u.i, u.b FROM unnest(%s::text[], %s::int[], %s::bytea[]) AS u(r, i, b)
JOIN calls c ON c.rollout_id = u.r AND c.idx = u.i WHERE c.body <> u.b"""
# Closing and tainting are sticky: a put that would reopen a closed record or clear a taint is a
# replica's stale read-modify-write (it read the record before another replica closed it) and is
# not applied; any other put replaces the record.
PUT_ROLLOUT = """INSERT INTO rollouts AS r (rollout_id, body, closed, tainted) VALUES (%s, %s, %s, %s)
ON CONFLICT (rollout_id) DO UPDATE
SET body = excluded.body, closed = excluded.closed, tainted = excluded.tainted
WHERE (excluded.closed OR NOT r.closed) AND (excluded.tainted OR NOT r.tainted)"""
PUT_BLOB = "INSERT INTO blobs VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
STORED_STOP = "(SELECT coalesce(max(idx) + 1, 0) FROM calls WHERE rollout_id = %(r)s)"
LEASE = f"""INSERT INTO index_leases AS l (rollout_id, stop) VALUES (%(r)s, {STORED_STOP} + %(n)s)
ON CONFLICT (rollout_id) DO UPDATE SET stop = greatest(l.stop, {STORED_STOP}) + %(n)s
RETURNING stop"""
NOTIFY = "SELECT pg_notify('openforgerl_rollouts', %s)"
LISTEN = "LISTEN openforgerl_rollouts; LISTEN openforgerl_flow"
# Pause/resume of every replica: the row's `seq` orders the changes (a replica applies a newer one only),
# and a policy version never goes back (`greatest`), whichever replica resumed.
SET_FLOW = """UPDATE gateway_flow SET seq = seq + 1, paused = coalesce(%s::boolean, paused),
policy_version = greatest(policy_version, %s)
WHERE id = 1 RETURNING seq, paused, policy_version"""
NOTIFY_FLOW = "SELECT pg_notify('openforgerl_flow', %s)"
READ_FLOW = "SELECT seq, paused, policy_version FROM gateway_flow WHERE id = 1"
# A rollout's call log bytes, counted by every replica: a reservation is applied only if it fits the
# quota (one atomic statement: the row lock serialises replicas), a settlement always.
RESERVE_LOG = """INSERT INTO rollout_log_bytes AS q (rollout_id, bytes)
SELECT %(r)s, %(n)s WHERE %(n)s <= %(q)s
ON CONFLICT (rollout_id) DO UPDATE SET bytes = q.bytes + excluded.bytes
WHERE q.bytes + excluded.bytes <= %(q)s
RETURNING bytes"""
CHARGE_LOG = """INSERT INTO rollout_log_bytes AS q (rollout_id, bytes) VALUES (%s, %s)
ON CONFLICT (rollout_id) DO UPDATE SET bytes = q.bytes + excluded.bytes"""
# A row only for the first refusal of a rollout over its quota (by any replica): that one is recorded.
NOTE_REFUSAL = """INSERT INTO rollout_log_bytes AS q (rollout_id, bytes, noted) VALUES (%s, 0, true)
ON CONFLICT (rollout_id) DO UPDATE SET noted = true WHERE NOT q.noted RETURNING bytes"""
