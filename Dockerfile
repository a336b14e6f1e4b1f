# syntax=docker/dockerfile:1
# Interlock as a static binary (pure-Go SQLite, no cgo) on a distroless base, running as a non-root
# user. The embedded SQLite default writes to the volume /data; set INTERLOCK_DB to use MySQL.
#   docker build -t interlock .
#   docker run -p 8080:8080 -v interlock-data:/data interlock

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The cache mounts keep modernc.org/sqlite's large generated code compiled between builds.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -o /out/interlock . \
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
ENTRYPOINT ["/interlock"]
