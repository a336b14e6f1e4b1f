package main

import (
	"context"
	"testing"

	"interlock/gormstore"
	"interlock/internal/dbtest"
)

// TestSQLCounterCountsTheStatementsSent: a store opened through the relay works, and the relay
// counts each statement it sends once, by verb and table, with transaction control apart.
func TestSQLCounterCountsTheStatementsSent(t *testing.T) {
	setting := dbtest.MySQLURL(dbtest.MySQLDSN(t)) // a new, empty database
	addr, err := parseMySQLAddr(setting)
	if err != nil {
		t.Fatal(err)
	}
	c, err := startSQLCounter(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	through, err := c.through(setting)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := gormstore.Open(ctx, through)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	}()
	if err := db.Exec("CREATE TABLE relay_probe (id INT PRIMARY KEY)").Error; err != nil {
		t.Fatal(err)
	}
	before := c.snapshot()
	for range 3 {
		var n int64
		if err := db.Table("relay_probe").Count(&n).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Exec("INSERT INTO relay_probe (id) VALUES (1), (2)").Error; err != nil {
		t.Fatal(err)
	}
	tx := db.Begin()
	if err := tx.Exec("UPDATE relay_probe SET id = 3 WHERE id = 2").Error; err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatal(err)
	}
	d := diffCounts(before, c.snapshot())
	got := map[string]int64{}
	for _, k := range d.Kinds {
		got[k.Kind] = k.N
	}
	if got["SELECT relay_probe"] != 3 || got["INSERT relay_probe"] != 1 || got["UPDATE relay_probe"] != 1 || d.Statements != 5 {
		t.Errorf("counted %+v (%d statements), want 3 SELECT, 1 INSERT and 1 UPDATE of relay_probe, 5 statements", d.Kinds, d.Statements)
	}
	if d.TxControl != 2 {
		t.Errorf("transaction control = %d, want 2 (START TRANSACTION, COMMIT)", d.TxControl)
	}
}

func TestStatementKind(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT `id`,`last_seq` FROM `agent_runs` WHERE id IN ('a')": "SELECT agent_runs",
		"INSERT INTO `run_events` (`run_id`) VALUES ('x')":           "INSERT run_events",
		"UPDATE `agent_runs` SET `status`='COMPLETED'":               "UPDATE agent_runs",
		"  select count(*) from suspended_counts":                    "SELECT suspended_counts",
		"START TRANSACTION":      "START",
		"COMMIT":                 "COMMIT",
		"SET time_zone='+00:00'": "SET",
		"DELETE FROM run_changes WHERE at < '2026-12-01'":                   "DELETE run_changes",
		"SELECT k.key_hash FROM idempotency_keys AS k LEFT JOIN agent_runs": "SELECT idempotency_keys",
	} {
		if got := statementKind([]byte(q)); got != want {
			t.Errorf("statementKind(%q) = %q, want %q", q, got, want)
		}
	}
}
