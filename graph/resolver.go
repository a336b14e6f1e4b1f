// Package graph serves the GraphQL API: gqlgen's generated executor and thin resolvers that
// parse arguments, call the run service and map its results. Errors are mapped to
// extensions.code in one place, the error presenter (errors.go).
package graph

import (
	"context"

	"interlock/runs"
)

// Resolver is the root resolver; it holds what every resolver needs.
type Resolver struct {
	Runs *runs.Service
}

type decidedByKey struct{}

// WithDecidedBy records, in a request's context, who decisions of that request are taken by.
func WithDecidedBy(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, decidedByKey{}, who)
}

func decidedBy(ctx context.Context) string {
	who, _ := ctx.Value(decidedByKey{}).(string)
	return who
}
