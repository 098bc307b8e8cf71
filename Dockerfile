# syntax=docker/dockerfile:1
#
# One image for every Recall service: the static `recall` binary on a
# distroless, non-root base. The subcommand picks the service:
#
#   docker run recall ingest | trigger | extractor | compactor
#   docker run -p 8080:8080 recall                   # `recall up`: everything on an embedded NATS
#
# The embedded NATS listens on the container's loopback: without tenants it
# has no authentication, and `recall up` refuses to serve it elsewhere. With
# tenants (RECALL_TENANTS) it authenticates every client with the generated
# users (credentials in /data/nats-credentials.json), and may be published:
#   docker run -e RECALL_TENANTS=... -p 8080:8080 -p 4222:4222 recall \
#     up -data /data -http 0.0.0.0:8080 -nats-listen 0.0.0.0:4222
#
# Build: docker build -t recall:local .

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Dependencies first, so code changes reuse the module layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false \
      -ldflags="-s -w" \
      -o /out/recall ./cmd/recall \
 && mkdir -p /out/data

# distroless/static: CA certificates, tzdata, /etc/passwd with the nonroot
# user (65532), no shell. Health checks use `recall probe <url>`.
FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="recall" \
      org.opencontainers.image.description="Background session memory for agent platforms on NATS JetStream" \
      org.opencontainers.image.source="https://github.com/recallhq/recall"
COPY --from=build /out/recall /usr/local/bin/recall
# Writable only for `recall up` (embedded JetStream store); the services keep
# no local state and run with a read-only root file system.
COPY --from=build --chown=65532:65532 /out/data /data
WORKDIR /data
USER 65532:65532
# 8080: HTTP edge (ingest, up). 9090: ops endpoints of trigger, extractor,
# compactor (/healthz, /readyz, /metrics). 4222: embedded NATS of `recall up`
# (loopback by default, see above).
EXPOSE 8080 9090 4222
ENTRYPOINT ["/usr/local/bin/recall"]
# -v: the services log to stderr (docker logs) instead of /data/recall.log.
CMD ["up", "-v", "-data", "/data", "-http", "0.0.0.0:8080", "-nats-listen", "127.0.0.1:4222"]
