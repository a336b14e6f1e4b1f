// Package graph serves the GraphQL API: gqlgen's generated executor and thin resolvers that
// parse arguments, call the run service and map its results. Errors are mapped to
// extensions.code in one place, the error presenter (errors.go).
package graph

// Resolver is the root resolver; it holds what every resolver needs. NewResolver builds it over
// the run service; a test gives it a fake RunService.
type Resolver struct {
	Runs RunService
}
