// go-webhook: the capmaas MaasMachineTemplate validating webhook written the way
// controller-runtime serves webhooks (net/http + crypto/tls + encoding/json, standard
// library only), for bench/webhook.sh. It decodes the AdmissionReview and the object into
// typed structs, runs the same rules as capmaas (image, ranges, MAAS names, tags,
// providerID, the reference's immutability checks) and answers allowed, or a 422 Invalid
// with causes, in the review's version.
//
//	GO111MODULE=off go build -o go-webhook ./bench/go-webhook
//	go-webhook -addr 127.0.0.1:9443 -cert tls.crt -key tls.key
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
)

type groupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

type request struct {
	UID       string           `json:"uid"`
	Kind      groupVersionKind `json:"kind"`
	Name      string           `json:"name"`
	Namespace string           `json:"namespace"`
	Operation string           `json:"operation"`
	DryRun    *bool            `json:"dryRun"`
	Object    json.RawMessage  `json:"object"`
	OldObject json.RawMessage  `json:"oldObject"`
}

type cause struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

type details struct {
	Name   string  `json:"name"`
	Group  string  `json:"group"`
	Kind   string  `json:"kind"`
	Causes []cause `json:"causes"`
}

type status struct {
	Metadata struct{} `json:"metadata"`
	Status   string   `json:"status"`
	Message  string   `json:"message"`
	Reason   string   `json:"reason"`
	Details  *details `json:"details,omitempty"`
	Code     int      `json:"code"`
}

type response struct {
	UID      string   `json:"uid"`
	Allowed  bool     `json:"allowed"`
	Result   *status  `json:"status,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

type review struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Request    *request  `json:"request,omitempty"`
	Response   *response `json:"response,omitempty"`
}

type vmConfig struct {
	DiskSize    *int   `json:"diskSize,omitempty"`
	StoragePool string `json:"storagePool,omitempty"`
	Network     string `json:"network,omitempty"`
	AutoStart   *bool  `json:"autoStart,omitempty"`
}

type machineSpec struct {
	FailureDomain  *string  `json:"failureDomain,omitempty"`
	SystemID       *string  `json:"systemID,omitempty"`
	Parent         *string  `json:"parent,omitempty"`
	ProviderID     *string  `json:"providerID,omitempty"`
	ResourcePool   *string  `json:"resourcePool,omitempty"`
	MinCPU         *int     `json:"minCPU"`
	MinMemory      *int     `json:"minMemory"`
	MinDiskSize    *int     `json:"minDiskSize,omitempty"`
	Tags           []string `json:"tags,omitempty"`
	Image          string   `json:"image"`
	DeployInMemory bool     `json:"deployInMemory,omitempty"`
	LXD            *struct {
		Enabled  *bool     `json:"enabled,omitempty"`
		VMConfig *vmConfig `json:"vmConfig,omitempty"`
	} `json:"lxd,omitempty"`
}

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type machineTemplate struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Template struct {
			Metadata objectMeta  `json:"metadata"`
			Spec     machineSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type fieldError struct {
	typ, reason, field, value, detail string
}

func (e fieldError) body() string {
	s := e.typ
	if e.value != "" {
		s += ": " + e.value
	}
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

var osystems = []string{"caringo", "centos", "custom", "esxi", "ol", "rhel", "suse", "ubuntu",
	"ubuntu-core", "windows"}

func only(s, set string) bool {
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.ContainsRune(set, c)
		if !ok {
			return false
		}
	}
	return true
}

func invalid(field, value, detail string) fieldError {
	return fieldError{"Invalid value", "FieldValueInvalid", field, value, detail}
}

func checkImage(p, image string) []fieldError {
	f := p + ".image"
	q := strconv.Quote(image)
	switch {
	case image == "":
		return []fieldError{{"Required value", "FieldValueRequired", f, "", ""}}
	case strings.HasPrefix(image, "/"):
		return []fieldError{invalid(f, q, "must not start with '/'")}
	case strings.HasSuffix(image, "/"):
		return []fieldError{invalid(f, q, "must not end with '/'")}
	case strings.Count(image, "/") > 1:
		return []fieldError{invalid(f, q, "must contain at most one '/' (<osystem>/<release> or a bare <release>)")}
	case !only(image, "._-/"):
		return []fieldError{invalid(f, q, "must contain only letters, digits, '.', '-', '_' and one '/'")}
	}
	os := "custom"
	if i := strings.IndexByte(image, '/'); i >= 0 {
		os = image[:i]
	}
	for _, k := range osystems {
		if k == os {
			return nil
		}
	}
	return []fieldError{invalid(f, q, fmt.Sprintf("unknown operating system %q (known: %s)", os,
		strings.Join(osystems, ", ")))}
}

func checkRange(f string, v *int, min, max int, required bool) []fieldError {
	switch {
	case v == nil && required:
		return []fieldError{{"Required value", "FieldValueRequired", f, "", ""}}
	case v == nil:
		return nil
	case *v < min:
		return []fieldError{invalid(f, strconv.Itoa(*v), fmt.Sprintf("must be greater than or equal to %d", min))}
	case max >= 0 && *v > max:
		return []fieldError{invalid(f, strconv.Itoa(*v), fmt.Sprintf("must be less than or equal to %d", max))}
	}
	return nil
}

func checkName(f string, s *string) []fieldError {
	switch {
	case s == nil:
		return nil
	case *s == "":
		return []fieldError{invalid(f, `""`, "must not be empty")}
	case len(*s) > 256:
		return []fieldError{{"Too long", "FieldValueTooLong", f, "", "may not be more than 256 bytes"}}
	case !only(*s, "-_"):
		return []fieldError{invalid(f, strconv.Quote(*s), "must be a MAAS name: letters, digits, '-' and '_' only")}
	}
	return nil
}

func checkProviderID(f string, s *string) []fieldError {
	if s == nil {
		return nil
	}
	ok := strings.HasPrefix(*s, "maas:///")
	rest := strings.TrimPrefix(*s, "maas:///")
	zone, id, found := strings.Cut(rest, "/")
	if !ok || !found || id == "" || strings.Contains(id, "/") || !only(zone, "-_") || !only(id, "-_") {
		return []fieldError{invalid(f, strconv.Quote(*s), "must be maas:///<zone>/<system_id> (zone and system_id of letters, digits, '-' and '_')")}
	}
	return nil
}

func validateSpec(p string, s *machineSpec) (errs []fieldError, warnings []string) {
	errs = append(errs, checkImage(p, s.Image)...)
	errs = append(errs, checkRange(p+".minCPU", s.MinCPU, 0, 1024, true)...)
	errs = append(errs, checkRange(p+".minMemory", s.MinMemory, 0, 16777216, true)...)
	errs = append(errs, checkRange(p+".minDiskSize", s.MinDiskSize, 0, -1, false)...)
	errs = append(errs, checkName(p+".resourcePool", s.ResourcePool)...)
	errs = append(errs, checkName(p+".failureDomain", s.FailureDomain)...)
	seen := map[string]bool{}
	for i := range s.Tags {
		f := fmt.Sprintf("%s.tags[%d]", p, i)
		if seen[s.Tags[i]] {
			errs = append(errs, fieldError{"Duplicate value", "FieldValueDuplicate", f, strconv.Quote(s.Tags[i]), ""})
			continue
		}
		seen[s.Tags[i]] = true
		errs = append(errs, checkName(f, &s.Tags[i])...)
	}
	errs = append(errs, checkProviderID(p+".providerID", s.ProviderID)...)
	errs = append(errs, checkName(p+".systemID", s.SystemID)...)
	if s.MinCPU != nil && s.MinMemory != nil && *s.MinCPU == 0 && *s.MinMemory == 0 {
		warnings = append(warnings, p+".minCPU and "+p+".minMemory are both 0: any machine will do")
	}
	return errs, warnings
}

func immutable(old, cur *machineSpec) string {
	switch {
	case old.Image != cur.Image:
		return fmt.Sprintf("maas machine template image change is not allowed, old=%s, new=%s", old.Image, cur.Image)
	case old.MinCPU != nil && cur.MinCPU != nil && *old.MinCPU != *cur.MinCPU:
		return fmt.Sprintf("maas machine template min cpu count change is not allowed, old=%d, new=%d", *old.MinCPU, *cur.MinCPU)
	case old.MinMemory != nil && cur.MinMemory != nil && *old.MinMemory != *cur.MinMemory:
		return fmt.Sprintf("maas machine template min memory change is not allowed, old=%d MB, new=%d MB", *old.MinMemory, *cur.MinMemory)
	}
	return ""
}

func invalidStatus(name string, errs []fieldError) *status {
	st := &status{Status: "Failure", Reason: "Invalid", Code: 422,
		Details: &details{Name: name, Group: "infrastructure.cluster.x-k8s.io", Kind: "MaasMachineTemplate"}}
	msgs := []string{}
	for _, e := range errs {
		st.Details.Causes = append(st.Details.Causes, cause{e.reason, e.body(), e.field})
		msgs = append(msgs, e.field+": "+e.body())
	}
	agg := strings.Join(msgs, ", ")
	if len(msgs) > 1 {
		agg = "[" + agg + "]"
	}
	st.Message = fmt.Sprintf("MaasMachineTemplate.infrastructure.cluster.x-k8s.io %q is invalid: %s", name, agg)
	return st
}

func validate(req *request) *response {
	resp := &response{UID: req.UID, Allowed: true}
	var cur, old machineTemplate
	if req.Operation != "CREATE" && req.Operation != "UPDATE" {
		return resp
	}
	if err := json.Unmarshal(req.Object, &cur); err != nil {
		resp.Allowed = false
		resp.Result = &status{Status: "Failure", Reason: "BadRequest", Code: 400, Message: err.Error()}
		return resp
	}
	if _, ok := cur.Metadata.Annotations["clusterctl.cluster.x-k8s.io/delete-for-move"]; ok {
		return resp
	}
	if req.Operation == "UPDATE" && json.Unmarshal(req.OldObject, &old) == nil {
		if msg := immutable(&old.Spec.Template.Spec, &cur.Spec.Template.Spec); msg != "" {
			resp.Allowed = false
			resp.Result = &status{Status: "Failure", Reason: "Forbidden", Code: 403, Message: msg}
			return resp
		}
	}
	errs, warnings := validateSpec("spec.template.spec", &cur.Spec.Template.Spec)
	resp.Warnings = warnings
	if len(errs) > 0 {
		resp.Allowed = false
		resp.Result = invalidStatus(cur.Metadata.Name, errs)
	}
	return resp
}

func serve(w http.ResponseWriter, r *http.Request) {
	var rv review
	body, err := io.ReadAll(io.LimitReader(r.Body, 7<<20))
	if err == nil {
		err = json.Unmarshal(body, &rv)
	}
	if err == nil && (rv.Kind != "AdmissionReview" || rv.Request == nil || rv.Request.UID == "") {
		err = fmt.Errorf("not an AdmissionReview request")
	}
	if err == nil && rv.Request.Kind.Kind != "MaasMachineTemplate" {
		err = fmt.Errorf("this endpoint admits MaasMachineTemplate, got %q", rv.Request.Kind.Kind)
	}
	if err != nil {
		http.Error(w, "bad AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	out := review{APIVersion: rv.APIVersion, Kind: "AdmissionReview", Response: validate(rv.Request)}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&out); err != nil {
		log.Print(err)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9443", "listen address")
	cert := flag.String("cert", "tls.crt", "certificate")
	key := flag.String("key", "tls.key", "key")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachinetemplate", serve)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("serving", ln.Addr())
	log.Fatal(http.ServeTLS(ln, mux, *cert, *key))
}
