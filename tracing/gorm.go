package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// GORM returns the GORM plugin that makes a client span per SQL statement, as a child of the span
// of the context the statement runs in (db.WithContext): named "SELECT agent_runs", with the
// statement as prepared (placeholders, never the values bound to them), the table, the rows and
// any error. (gorm.io/plugin/opentelemetry is not among the versions this project takes, and a
// span per statement is all that is wanted.) Nil when tracing is off.
func (t *Tracing) GORM() gorm.Plugin {
	if t == nil {
		return nil
	}
	return &gormPlugin{t: t}
}

type gormPlugin struct{ t *Tracing }

var _ gorm.Plugin = (*gormPlugin)(nil)

// parentKey keeps, on the statement, the context its span was started from, given back to the
// statement when the span ends so the next statement of a transaction is not nested in this one.
const parentKey = "tracing:parent"

func (*gormPlugin) Name() string { return "tracing" }

// Initialize registers the callbacks around each kind of statement GORM runs.
func (p *gormPlugin) Initialize(db *gorm.DB) error {
	cb := db.Callback()
	type registrar interface {
		Register(name string, fn func(*gorm.DB)) error
	}
	steps := []struct {
		main          string
		before, after registrar
	}{
		{"gorm:create", cb.Create().Before("gorm:create"), cb.Create().After("gorm:create")},
		{"gorm:query", cb.Query().Before("gorm:query"), cb.Query().After("gorm:query")},
		{"gorm:update", cb.Update().Before("gorm:update"), cb.Update().After("gorm:update")},
		{"gorm:delete", cb.Delete().Before("gorm:delete"), cb.Delete().After("gorm:delete")},
		{"gorm:row", cb.Row().Before("gorm:row"), cb.Row().After("gorm:row")},
		{"gorm:raw", cb.Raw().Before("gorm:raw"), cb.Raw().After("gorm:raw")},
	}
	for _, s := range steps {
		if err := s.before.Register("tracing:before_"+s.main, p.before); err != nil {
			return fmt.Errorf("tracing: register before %s: %w", s.main, err)
		}
		if err := s.after.Register("tracing:after_"+s.main, p.after); err != nil {
			return fmt.Errorf("tracing: register after %s: %w", s.main, err)
		}
	}
	return nil
}

func (p *gormPlugin) before(db *gorm.DB) {
	parent := db.Statement.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, _ := p.t.tracer.Start(parent, "sql", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(dbSystem(db.Dialector.Name())))
	db.InstanceSet(parentKey, parent)
	db.Statement.Context = ctx
}

func (p *gormPlugin) after(db *gorm.DB) {
	span := trace.SpanFromContext(db.Statement.Context)
	if parent, ok := db.InstanceGet(parentKey); ok {
		db.Statement.Context = parent.(context.Context)
	}
	if !span.IsRecording() {
		return
	}
	defer span.End()
	query := strings.TrimSpace(db.Statement.SQL.String())
	op := strings.ToUpper(firstWord(query))
	name := op
	if table := db.Statement.Table; table != "" {
		name += " " + table
		span.SetAttributes(semconv.DBCollectionName(table))
	}
	if name == "" {
		name = "sql"
	}
	span.SetName(name)
	span.SetAttributes(semconv.DBQueryText(query), semconv.DBOperationName(op), attribute.Int64("db.rows_affected", db.Statement.RowsAffected))
	if err := db.Error; err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		span.RecordError(err)
		span.SetStatus(codes.Error, "SQL statement failed")
	}
}

// dbSystem is db.system.name for a GORM dialect.
func dbSystem(dialect string) attribute.KeyValue {
	switch dialect {
	case "mysql":
		return semconv.DBSystemNameMySQL
	case "sqlite":
		return semconv.DBSystemNameSQLite
	}
	return semconv.DBSystemNameKey.String(dialect)
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t\n("); i >= 0 {
		return s[:i]
	}
	return s
}
