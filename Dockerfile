# syntax=docker/dockerfile:1
# Interlock as a static binary (pure-Go SQLite, no cgo) on a distroless base, running as a non-root
# user. The embedded SQLite default writes to the volume /data; set INTERLOCK_DB to use MySQL.
#   docker build --build-arg VERSION=1.2.3 -t interlock .
#   docker run -p 8080:8080 -v interlock-data:/data interlock
# docker-compose.yml runs two replicas over MySQL 8.4 behind nginx.

FROM golang:1.26 AS build
# VERSION is what `interlock version` prints and the start log line shows.
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The cache mounts keep modernc.org/sqlite's large generated code compiled between builds.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/interlock . \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
# 65532 is distroless's "nonroot" user; a number, so that runAsNonRoot checks can verify it.
COPY --from=build /out/interlock /interlock
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
ENV INTERLOCK_ADDR=:8080 \
    INTERLOCK_DB=sqlite:/data/interlock.db
VOLUME /data
EXPOSE 8080
# The image has no shell and no curl: the binary checks itself, asking /healthz on the port of
# INTERLOCK_ADDR (so a changed INTERLOCK_ADDR is followed).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["/interlock", "healthcheck"]
ENTRYPOINT ["/interlock"]
