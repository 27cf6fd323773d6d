-- The W3C traceparent of the request that enqueued a job: its attempts'
-- upstream calls continue that trace.
ALTER TABLE jobs ADD COLUMN traceparent TEXT;
