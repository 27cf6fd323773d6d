# syntax=docker/dockerfile:1
# The sluice binary in a slim, non-root image (docs/operations.md).
#
#   docker build -t sluice .
#   docker run -p 8080:8080 -e OPENAI_API_KEY sluice
#
# Stage 1 builds the release binary with the locked dependencies; stage 2
# holds only the binary, the CA certificates it verifies providers with,
# and an unprivileged user.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Manifests first, so a change to the code alone reuses the dependency layer.
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
RUN cargo build --release --locked -p sluice \
 && strip target/release/sluice \
 && target/release/sluice --version

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/sluice --shell /usr/sbin/nologin sluice \
 && mkdir -p /var/lib/sluice /etc/sluice \
 && chown sluice:sluice /var/lib/sluice
COPY --from=build /src/target/release/sluice /usr/local/bin/sluice
USER 10001:10001
WORKDIR /var/lib/sluice
# Listen on every interface inside the container; keep the SQLite stores,
# spill files and traces on the volume.
ENV SLUICE_LISTEN=0.0.0.0:8080 \
    SLUICE_DATA_DIR=/var/lib/sluice \
    SLUICE_LOG=info
VOLUME ["/var/lib/sluice"]
EXPOSE 8080
# `sluice health` asks the gateway's own /healthz (no curl in the image).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["sluice", "health", "--url", "http://127.0.0.1:8080/healthz"]
# Drain in-flight requests and jobs on SIGTERM ([shutdown] drain_timeout_ms,
# 25 s by default: keep the orchestrator's grace period above it).
STOPSIGNAL SIGTERM
ENTRYPOINT ["sluice"]
CMD ["serve"]
