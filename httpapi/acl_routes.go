package httpapi

// RouteRule is what one route needs with ACL on.
type RouteRule struct {
	// Perm is the permission the guard requires before the handler runs.
	Perm Permission
	// Namespaced routes touch objects of one namespace: the guard checks
	// only that the token holds Perm in some namespace, and the handler
	// checks it again for the namespace of the object (?namespace=, the
	// spec's namespace, or the stored job, workflow or schedule).
	Namespaced bool
}

// Routes is the one table of every route the agent serves, keyed by the
// exact net/http ServeMux pattern it is registered under. ACL.Handle is
// the only way routes are registered (a test fails for any other
// HandleFunc/Handle call in httpapi and cli/agent) and it panics for a
// pattern missing here, so a new route cannot start unguarded; the route
// walk test (acl_routes_test.go) sends every registered pattern with no
// token, a bad, an expired and each role's token.
//
// Decisions (docs/security.md): health and ready stay open (probes);
// the OpenAPI description is open (it holds no state);
// bootstrap is open but works once; the UI's static files are open and
// the API calls it makes are guarded like any other; metrics and pprof
// need operator (they describe every namespace and the host); the event
// stream needs read and shows a token only its namespaces' events (node
// and leader events need operator); node and queue listings need read in
// some namespace.
var Routes = map[string]RouteRule{
	// Jobs.
	"POST /v1/jobs":                         {PermSubmit, true},
	"GET /v1/jobs":                          {PermRead, true},
	"GET /v1/jobs/{id}":                     {PermRead, true},
	"POST /v1/jobs/{id}/cancel":             {PermSubmit, true},
	"POST /v1/jobs/{id}/retry":              {PermSubmit, true},
	"GET /v1/jobs/{id}/logs":                {PermRead, true},
	"POST /v1/jobs/{id}/exec":               {PermExec, true}, // run a command in the live attempt (proxied to its node); not implied by write
	"GET /v1/jobs/{id}/gpu-usage":           {PermRead, true}, // measured by the attempt's node, proxied there
	"GET /v1/jobs/{id}/events":              {PermRead, true},
	"GET /v1/jobs/{id}/result":              {PermRead, true},
	"GET /v1/jobs/{id}/tasks":               {PermRead, true},
	"POST /v1/jobs/{id}/checkpoint":         {PermSubmit, true},
	"GET /v1/jobs/{id}/checkpoint":          {PermRead, true},
	"GET /v1/jobs/counts":                   {PermRead, true},
	"GET /v1/jobs/{id}/artifacts":           {PermRead, true},
	"GET /v1/jobs/{id}/artifacts/{path...}": {PermRead, true},
	"GET /v1/events":                        {PermRead, true},
	"GET /v1/metrics":                       {PermOperator, false},
	"POST /v1/internal/submits":             {PermInternal, false},
	"GET /v1/health":                        {PermOpen, false},
	"GET /v1/ready":                         {PermOpen, false},
	"GET /v1/openapi.json":                  {PermOpen, false}, // the API's description: a client generator needs it before a token
	"/":                                     {PermOpen, false}, // API: 404/405 only; agent: hands over to the API's own mux
	"POST /v1/workflows":                    {PermWrite, true},
	"GET /v1/workflows":                     {PermRead, true},
	"GET /v1/workflows/{id}":                {PermRead, true},
	"DELETE /v1/workflows/{id}":             {PermWrite, true},
	"POST /v1/workflows/{id}/retry":         {PermWrite, true},

	// Node to node: a child's inputs fetched from the parent's node.
	// Client agents too: a client asks a server, which serves or proxies.
	"GET /v1/internal/artifacts/{id}/{path...}": {PermClient, false},

	// Schedules.
	"POST /v1/schedules":                {PermWrite, true},
	"GET /v1/schedules":                 {PermRead, true},
	"GET /v1/schedules/{name}":          {PermRead, true},
	"PUT /v1/schedules/{name}":          {PermWrite, true},
	"DELETE /v1/schedules/{name}":       {PermWrite, true},
	"POST /v1/schedules/{name}/trigger": {PermWrite, true},
	"POST /v1/schedules/{name}/pause":   {PermWrite, true},
	"POST /v1/schedules/{name}/resume":  {PermWrite, true},

	// Nodes and queues (cluster-wide objects).
	"GET /v1/nodes":                     {PermRead, false},
	"GET /v1/nodes/{name}":              {PermRead, false},
	"POST /v1/nodes/{name}/drain":       {PermOperator, false},
	"POST /v1/nodes/{name}/eligibility": {PermOperator, false},
	"POST /v1/nodes/{name}/down":        {PermOperator, false},
	"POST /v1/nodes/down":               {PermOperator, false},
	"POST /v1/nodes/drain":              {PermOperator, false},
	"POST /v1/nodes/eligibility":        {PermOperator, false},
	"POST /v1/nodes/{name}/gpus/reset":  {PermOperator, false}, // an operator's GPU health reset
	"GET /v1/queues":                    {PermRead, false},
	"PUT /v1/queues/{name}":             {PermWrite, true}, // queues are shared: write on "*"

	// Namespace records (quota and policy). Setting one needs management:
	// its policy can grant root (docs/security.md, "Namespace policy").
	"GET /v1/namespaces":           {PermRead, false}, // lists the namespaces the token may read
	"GET /v1/usage":                {PermRead, false}, // counts the namespaces the token may read
	"GET /v1/namespaces/{name}":    {PermRead, true},
	"GET /v1/namespaces/shares":    {PermRead, false}, // rows of the namespaces the token may read
	"PUT /v1/namespaces/{name}":    {PermManagement, false},
	"DELETE /v1/namespaces/{name}": {PermManagement, false},
	// What a node's jobs use now (the node measures it; others proxy).
	"GET /v1/nodes/{name}/usage": {PermRead, false},

	// Cluster and operator.
	"GET /v1/cluster/members":                   {PermOperator, false},
	"GET /v1/cluster/raft":                      {PermOperator, false},
	"POST /v1/cluster/join":                     {PermOperator, false},
	"POST /v1/cluster/leave":                    {PermOperator, false},
	"GET /v1/cluster/hash":                      {PermOperator, false},
	"DELETE /v1/cluster/raft/peers/{name}":      {PermOperator, false},
	"POST /v1/cluster/raft/transfer-leadership": {PermOperator, false},
	"GET /v1/operator/snapshot":                 {PermOperator, false},
	"PUT /v1/operator/snapshot":                 {PermOperator, false},
	"POST /v1/operator/snapshot":                {PermOperator, false},

	// Gossip key rotation: every node's keyring by fingerprint; install|use|remove on every alive node.
	"GET /v1/operator/gossip-keys":  {PermOperator, false},
	"POST /v1/operator/gossip-keys": {PermOperator, false},

	// ACL.
	"POST /v1/acl/bootstrap":           {PermOpen, false}, // works once
	"GET /v1/acl/tokens":               {PermManagement, false},
	"POST /v1/acl/tokens":              {PermManagement, false},
	"DELETE /v1/acl/tokens/{accessor}": {PermManagement, false},
	"GET /v1/acl/token/self":           {PermToken, false},

	// The cluster-internal secret: a new one drawn by the leader.
	"POST /v1/acl/internal-secret/rotate": {PermManagement, false},

	// The agent's own routes (cli/agent/agent.go).
	"/v1/internal/":                       {PermInternal, false}, // raft forwarding, leave, catch-up
	"/v1/internal/submits":                {PermInternal, false}, // handed to the API, which checks it again
	"GET /v1/internal/checkpoints/{name}": {PermClient, false},   // a checkpoint directory for a task's next attempt on another node (a client's through a server)
	"POST /v1/internal/work/{node}":       {PermClient, false},   // a client agent's work stream (cluster/workstream.go)
	"POST /v1/internal/reports/{node}":    {PermClient, false},   // a client agent's attempt reports
	"GET /v1/internal/voters":             {PermClient, false},   // a fresh agent choosing its role (cluster/voters.go)
	"/ui/":                                {PermOpen, false},     // static assets; the API calls they make are guarded
	"GET /{$}":                            {PermOpen, false},     // redirect to /ui/
	"/debug/pprof/":                       {PermOperator, false},
	"/debug/pprof/cmdline":                {PermOperator, false},
	"/debug/pprof/profile":                {PermOperator, false},
	"/debug/pprof/symbol":                 {PermOperator, false},
	"/debug/pprof/trace":                  {PermOperator, false},

	// The agent's: a child's inputs fetched node to node; handed to the API, which checks it again.
	"/v1/internal/artifacts/": {PermClient, false},
}
