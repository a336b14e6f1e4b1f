# Builds the Interlock server as a static binary (pure-Go SQLite driver, no cgo).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /interlock .

FROM gcr.io/distroless/static-debian12
COPY --from=build /interlock /interlock
EXPOSE 8080
ENTRYPOINT ["/interlock"]
