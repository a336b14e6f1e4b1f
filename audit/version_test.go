package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"interlock/audit"
	"interlock/runtype"
)

// TestExportWritesGrantPolicyAndApprovers: a decision's line holds the grant that let it
// through, the revision of the policy that judged it and a quorum's approvals (who, when), and
// verifies; a decision without them holds nulls.
func TestExportWritesGrantPolicyAndApprovers(t *testing.T) {
	t.Parallel()
	list := decisions()[:2]
	list[0].GrantID, list[0].PolicyRevision = ptr("gr_1"), ptr("sha256:abc")
	list[0].Approvals = &runtype.Approvals{Required: 2, By: []runtype.Approval{{Subject: "bob", At: t0}, {Subject: "alice", At: t0.Add(time.Second)}}}
	for _, enc := range []audit.Encoding{audit.NDJSON, audit.CSV} {
		file := export(t, enc, list)
		if _, err := audit.Verify(strings.NewReader(file)); err != nil {
			t.Fatalf("%v: %v", enc, err)
		}
		if !strings.Contains(file, "interlock-audit/2") {
			t.Fatalf("%v: not version 2: %s", enc, file)
		}
	}
	_, recs := lines(audit.NDJSON, export(t, audit.NDJSON, list))
	var d struct {
		GrantID, PolicyRevision *string
		Approvals               json.RawMessage
	}
	if err := json.Unmarshal([]byte(recs[1]), &d); err != nil {
		t.Fatal(err)
	}
	if d.GrantID == nil || *d.GrantID != "gr_1" || d.PolicyRevision == nil || *d.PolicyRevision != "sha256:abc" ||
		string(d.Approvals) != `[{"subject":"bob","at":"2026-12-01T09:00:00.000Z"},{"subject":"alice","at":"2026-12-01T09:00:01.000Z"}]` {
		t.Fatalf("decision line = %s", recs[1])
	}
	if !strings.Contains(recs[2], `"grantId":null,"policyRevision":null,"approvals":null`) {
		t.Fatalf("second decision line = %s", recs[2])
	}
	// An approver edited out is found.
	edited := strings.Replace(recs[1], `"subject":"bob"`, `"subject":"eve"`, 1)
	wantLineError(t, "an approver edited", recs[0]+edited+strings.Join(recs[2:], ""), 2, "hash does not match")
}

// TestVerifyReadsVersion1: a file of the first version of the format (decisions without
// grantId, policyRevision and approvals), written as its writer did, still verifies; the same
// file claiming version 2 does not.
func TestVerifyReadsVersion1(t *testing.T) {
	t.Parallel()
	prev := ""
	var b strings.Builder
	add := func(content string) {
		canonical, err := jcs.Transform([]byte(content))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(append([]byte(prev), canonical...))
		prev = hex.EncodeToString(h[:])
		b.WriteString(strings.TrimSuffix(content, "}") + `,"hash":"` + prev + `"}` + "\n")
	}
	header := `{"record":"header","format":"interlock-audit/1","from":"2026-12-01T09:00:00.000Z","to":"2026-12-01T10:00:00.000Z","exportedAt":"2026-12-01T11:00:00.000Z","exportedBy":"auditor"}`
	add(header)
	add(`{"record":"decision","seq":"1","id":"7","runId":"run-a","agentId":"support","resourceId":"acme","toolCallId":"tc_1","tool":"issue_refund","kind":"APPROVED","args":"{\"order\":42}","editedArgs":null,"resumeData":null,"decidedBy":"alice","decidedAt":"2026-12-01T09:01:00.000Z","askedAt":"2026-12-01T09:00:00.000Z","reason":null,"receiptId":null}`)
	add(`{"record":"end","count":"1"}`)
	// The content hashes strings; the file holds JSON values as JSON and numbers as numbers.
	file := strings.NewReplacer(`"seq":"1"`, `"seq":1`, `"id":"7"`, `"id":7`, `"args":"{\"order\":42}"`, `"args":{"order":42}`, `"count":"1"`, `"count":1`).Replace(b.String())
	sum, err := audit.Verify(strings.NewReader(file))
	if err != nil || sum.Decisions != 1 {
		t.Fatalf("a version 1 file: %+v, %v", sum, err)
	}
	wantLineError(t, "version 1 fields under a version 2 header", strings.Replace(file, "interlock-audit/1", "interlock-audit/2", 1), 1, "hash does not match")
}
