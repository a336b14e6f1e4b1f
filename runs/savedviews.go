package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"interlock/runtype"
)

// Saved views: a person's named sets of inbox and history filters (runtype.SavedView), kept
// per subject, so that "my deploys waiting" is one click away on any browser they sign in on.
// A view is the console's URL query string; the server stores it as given (bounded), and the
// console parses it as it parses its own URL.

// Bounds of a saved view.
const (
	maxViewName     = 100
	maxViewQuery    = 2000
	maxViewsPerUser = 100
)

// SavedViews returns the principal's saved views, by name. Who may call: any principal that
// may read runs (viewer or requester).
func (s *Service) SavedViews(ctx context.Context) ([]runtype.SavedView, error) {
	if err := mayGet(ctx); err != nil {
		return nil, err
	}
	list, err := s.store.SavedViews(ctx, runtype.PrincipalFrom(ctx).Subject)
	if err != nil {
		return nil, fmt.Errorf("read saved views: %w", err)
	}
	return list, nil
}

// SaveView stores a new view for the principal of ctx. Errors: BAD_USER_INPUT for an empty or
// over-long name (100 characters) or query (2,000 bytes), a query that is not a URL query string
// (it may start with "?", which is dropped), or more than 100 views; CONFLICT when the principal
// has a view of that name already (delete it first to replace it).
func (s *Service) SaveView(ctx context.Context, name, query string) (*runtype.SavedView, error) {
	if err := mayGet(ctx); err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	query = strings.TrimPrefix(strings.TrimSpace(query), "?")
	switch {
	case name == "":
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "a saved view needs a name")
	case utf8.RuneCountInString(name) > maxViewName:
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "a saved view's name is at most %d characters", maxViewName)
	case len(query) > maxViewQuery:
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "a saved view's query is at most %d bytes", maxViewQuery)
	case strings.ContainsAny(query, "#\n\r\t "):
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "query must be a URL query string (like q=deploy&agentId=ops), without spaces or #")
	}
	subject := runtype.PrincipalFrom(ctx).Subject
	n, err := s.store.CountSavedViews(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("count saved views: %w", err)
	}
	if n >= maxViewsPerUser {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "%s has %d saved views, the most one person may keep: delete one first", subject, n)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("saved view id: %w", err)
	}
	v := runtype.SavedView{ID: id.String(), Subject: subject, Name: name, Query: query, CreatedAt: s.now()}
	if err := s.store.SaveView(ctx, v); err != nil {
		if errors.Is(err, ErrDuplicateView) {
			return nil, runtype.Errorf(runtype.CodeConflict, "%s has a saved view named %q already", subject, name)
		}
		return nil, fmt.Errorf("save view: %w", err)
	}
	return &v, nil
}

// DeleteSavedView deletes the principal's view id. Errors: NOT_FOUND when the principal has no
// view of that id (another person's views do not exist for them).
func (s *Service) DeleteSavedView(ctx context.Context, id string) error {
	if err := mayGet(ctx); err != nil {
		return err
	}
	deleted, err := s.store.DeleteSavedView(ctx, runtype.PrincipalFrom(ctx).Subject, id)
	if err != nil {
		return fmt.Errorf("delete saved view: %w", err)
	}
	if !deleted {
		return runtype.Errorf(runtype.CodeNotFound, "no saved view with id %q", id)
	}
	return nil
}
