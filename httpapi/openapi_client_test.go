package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/foreman-sched/foreman/httpapi/internal/oapiclient"
)

// TestOpenAPIGeneratedClient: a client oapi-codegen generated from the
// description (httpapi/internal/oapiclient) submits a job to a real
// in-process server and reads it back, every exchange checked against the
// description too; and the generated code is as new as the description.
func TestOpenAPIGeneratedClient(t *testing.T) {
	doc := loadOpenAPI(t)
	gen, err := oapiclient.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	// The code embeds the part of the description it was generated from
	// (its operations and the schemas they use): that part must be today's.
	same := func(what string, a, b any) {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		if string(x) != string(y) {
			t.Errorf("%s changed since httpapi/internal/oapiclient was generated: run go generate ./httpapi/internal/oapiclient", what)
		}
	}
	for name, s := range gen.Components.Schemas {
		same("schema "+name, s, doc.Components.Schemas[name])
	}
	ops := 0
	for path, item := range gen.Paths.Map() {
		for method, op := range item.Operations() {
			ops++
			it := doc.Paths.Value(path)
			if it == nil || it.GetOperation(method) == nil {
				t.Errorf("the generated client has %s %s, which the description lacks", method, path)
				continue
			}
			// oapi-codegen embeds operationIds in Go case.
			was, now := *op, *it.GetOperation(method)
			was.OperationID, now.OperationID = "", ""
			same(method+" "+path, was, now)
		}
	}
	if ops == 0 {
		t.Fatal("the generated client embeds no operation")
	}

	a := newTestAPI(t)
	a.addNode("n1", "", 4000, 8192)
	c := newContract(t, a.srv.Config.Handler.(*server))
	cl, err := oapiclient.NewClientWithResponses(a.srv.URL, oapiclient.WithHTTPClient(c.client()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	var cmd oapiclient.CommandInput
	if err := cmd.FromCommandInput0([]string{"/bin/sh", "-c", "echo hi"}); err != nil {
		t.Fatal(err)
	}
	var body oapiclient.SubmitJobsJSONRequestBody
	if err := body.FromJobSpecInput(oapiclient.JobSpecInput{Name: new("hello"), Command: &cmd, Priority: new(70), Labels: &map[string]string{"team": "data"}}); err != nil {
		t.Fatal(err)
	}
	sub, err := cl.SubmitJobsWithResponse(ctx, &oapiclient.SubmitJobsParams{IdempotencyKey: new("gen-1")}, body)
	if err != nil || sub.JSON201 == nil {
		t.Fatalf("submit: %v %d %s", err, sub.StatusCode(), sub.Body)
	}
	created, err := sub.JSON201.AsSubmitResponse()
	if err != nil || created.Id == "" || created.Duplicate {
		t.Fatalf("submit reply %s: %+v %v", sub.Body, created, err)
	}

	job, err := cl.GetJobWithResponse(ctx, created.Id, nil)
	if err != nil || job.JSON200 == nil {
		t.Fatalf("get: %v %d %s", err, job.StatusCode(), job.Body)
	}
	j := job.JSON200.Job
	if j.Id != created.Id || j.State != oapiclient.JobStateQueued || j.Spec.Name == nil || *j.Spec.Name != "hello" || j.Spec.Priority != 70 {
		t.Errorf("job %s: %+v", created.Id, j)
	}
	if j.Spec.Command == nil || len(*j.Spec.Command) != 3 {
		t.Errorf("command %v, want the argv submitted", j.Spec.Command)
	}

	list, err := cl.ListJobsWithResponse(ctx, &oapiclient.ListJobsParams{State: new(oapiclient.ListJobsParamsStateQueued), Label: &[]string{"team=data"}})
	if err != nil || list.JSON200 == nil || len(list.JSON200.Jobs) != 1 || list.JSON200.Jobs[0].Id != created.Id {
		t.Errorf("list: %v %s", err, list.Body)
	}

	// Errors come back typed, with the server's code.
	missing, err := cl.GetJobWithResponse(ctx, "no-such-job", nil)
	if err != nil || missing.JSON404 == nil || missing.JSON404.Code != oapiclient.ErrorCodeNotFound {
		t.Errorf("unknown job: %v %d %s", err, missing.StatusCode(), missing.Body)
	}
	if missing.StatusCode() != http.StatusNotFound {
		t.Errorf("unknown job: %d", missing.StatusCode())
	}
}
