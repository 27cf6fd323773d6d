-- Tiers, tenants and their API keys. Times are milliseconds since the
-- Unix epoch; limits and tags are JSON text. A key is stored only as the
-- SHA-256 of the whole key (hex); its id is the public part.

CREATE TABLE tiers (
    name       TEXT    PRIMARY KEY,
    limits     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE tenants (
    name       TEXT    PRIMARY KEY,
    tier       TEXT    REFERENCES tiers (name),
    limits     TEXT    NOT NULL,
    tags       TEXT    NOT NULL,
    state      TEXT    NOT NULL CHECK (state IN ('active', 'blocked')),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id          TEXT    PRIMARY KEY,
    tenant      TEXT    NOT NULL REFERENCES tenants (name),
    hash        TEXT    NOT NULL,
    name        TEXT,
    tier        TEXT    REFERENCES tiers (name),
    limits      TEXT    NOT NULL,
    tags        TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('active', 'revoked', 'blocked', 'rotated')),
    grace_until INTEGER,
    replaced_by TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE INDEX api_keys_tenant ON api_keys (tenant, id);
