// gpupoc-metrics-adapter serves external.metrics.k8s.io/v1beta1 from Prometheus instant queries,
// so that the real HorizontalPodAutoscaler controller can scale on a Prometheus metric.
// Each configured external metric name maps to a PromQL template (--rules=FILE, YAML or JSON):
//
//	metrics:
//	- name: vllm_num_requests_waiting
//	  query: 'sum(vllm:num_requests_waiting{namespace="{{.Namespace}}", {{.Selector}}})'
//
// {{.Namespace}} is the HPA's namespace; {{.Selector}} is the HPA metric's label selector rendered as
// comma-separated PromQL label matchers (empty when the HPA gives none; PromQL accepts a trailing comma).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/metrics"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// rulesFile is the --rules document.
type rulesFile struct {
	Metrics []struct {
		Name  string `json:"name"`
		Query string `json:"query"`
	} `json:"metrics"`
}

// queryInput is what a query template sees.
type queryInput struct {
	Namespace string
	Selector  string
	Metric    string
}

// promProvider answers external metrics from Prometheus.
type promProvider struct {
	promURL string
	client  *http.Client
	names   []string                      // configured order, for ListAllExternalMetrics
	queries map[string]*template.Template // by external metric name
}

func loadRules(path string) (names []string, queries map[string]*template.Template, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var doc rulesFile
	if err := yaml.UnmarshalStrict(raw, &doc); err != nil { // YAML is a superset of JSON
		return nil, nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	queries = map[string]*template.Template{}
	for i, m := range doc.Metrics {
		if m.Name == "" || m.Query == "" {
			return nil, nil, fmt.Errorf("%s: metrics[%d] needs both name and query", path, i)
		}
		if _, dup := queries[m.Name]; dup {
			return nil, nil, fmt.Errorf("%s: metric %q configured twice", path, m.Name)
		}
		t, err := template.New(m.Name).Option("missingkey=error").Parse(m.Query)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: metric %q: %w", path, m.Name, err)
		}
		queries[m.Name] = t
		names = append(names, m.Name)
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("%s: no metrics configured", path)
	}
	return names, queries, nil
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// promMatchers renders a Kubernetes label selector as PromQL label matchers. Label keys are
// sanitized the way Prometheus exporters do it ("app.kubernetes.io/name" -> "app_kubernetes_io_name").
func promMatchers(sel labels.Selector) (string, error) {
	if sel == nil {
		return "", nil
	}
	reqs, _ := sel.Requirements()
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		name := invalidLabelChars.ReplaceAllString(r.Key(), "_")
		vals := r.Values().List() // sorted
		alternatives := make([]string, len(vals))
		for i, v := range vals {
			alternatives[i] = regexp.QuoteMeta(v)
		}
		alt := strconv.Quote(strings.Join(alternatives, "|"))
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals:
			out = append(out, name+"="+strconv.Quote(vals[0]))
		case selection.NotEquals:
			out = append(out, name+"!="+strconv.Quote(vals[0]))
		case selection.In: // PromQL regexes are fully anchored
			out = append(out, name+"=~"+alt)
		case selection.NotIn:
			out = append(out, name+"!~"+alt)
		case selection.Exists:
			out = append(out, name+`!=""`)
		case selection.DoesNotExist:
			out = append(out, name+`=""`)
		default:
			return "", fmt.Errorf("label selector operator %q is not supported", r.Operator())
		}
	}
	return strings.Join(out, ", "), nil
}

// promResponse is the part of the /api/v1/query answer that we read.
type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix seconds (number), value (string)]
}

func (p *promProvider) instantQuery(ctx context.Context, query string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.promURL+"/api/v1/query",
		strings.NewReader(url.Values{"query": {query}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var pr promResponse
	if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil {
		return nil, fmt.Errorf("prometheus answered HTTP %d with an undecodable body: %w", resp.StatusCode, err)
	}
	if pr.Status != "success" {
		return nil, fmt.Errorf("prometheus: %s: %s", pr.ErrorType, pr.Error)
	}
	switch pr.Data.ResultType {
	case "vector":
		var samples []promSample
		err := json.Unmarshal(pr.Data.Result, &samples)
		return samples, err
	case "scalar":
		var s promSample
		err := json.Unmarshal(pr.Data.Result, &s.Value)
		return []promSample{s}, err
	default:
		return nil, fmt.Errorf("prometheus returned a %s; the query must yield an instant vector or a scalar", pr.Data.ResultType)
	}
}

func (p *promProvider) GetExternalMetric(ctx context.Context, namespace string, sel labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	tmpl, ok := p.queries[info.Metric]
	if !ok {
		return nil, apierrors.NewNotFound(external_metrics.Resource("metric"), info.Metric)
	}
	matchers, err := promMatchers(sel)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var query bytes.Buffer
	if err := tmpl.Execute(&query, queryInput{Namespace: namespace, Selector: matchers, Metric: info.Metric}); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	samples, err := p.instantQuery(ctx, query.String())
	if err != nil {
		klog.ErrorS(err, "Prometheus query failed", "metric", info.Metric, "namespace", namespace, "query", query.String())
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("querying Prometheus for %s: %v", info.Metric, err))
	}
	klog.V(2).InfoS("Prometheus query", "metric", info.Metric, "namespace", namespace, "query", query.String(), "results", len(samples))

	list := &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{}}
	for _, s := range samples {
		ts, tsOK := s.Value[0].(float64)
		str, strOK := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if !tsOK || !strOK || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			klog.V(2).InfoS("Skipping sample without a finite value", "metric", info.Metric, "labels", s.Metric, "value", s.Value)
			continue
		}
		list.Items = append(list.Items, external_metrics.ExternalMetricValue{
			MetricName:   info.Metric,
			MetricLabels: s.Metric,
			Timestamp:    metav1.NewTime(time.UnixMilli(int64(math.Round(ts * 1000)))),
			Value:        *resource.NewMilliQuantity(int64(math.Round(v*1000)), resource.DecimalSI),
		})
	}
	return list, nil
}

func (p *promProvider) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	out := make([]provider.ExternalMetricInfo, len(p.names))
	for i, n := range p.names {
		out[i] = provider.ExternalMetricInfo{Metric: n}
	}
	return out
}

type adapter struct {
	basecmd.AdapterBase
	rulesPath, promURL, kubeconfig string
}

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()

	a := &adapter{}
	a.Name = "gpupoc-metrics-adapter"
	fs := a.Flags() // the library's serving, delegated authn/authz, audit and --lister-kubeconfig flags
	fs.StringVar(&a.rulesPath, "rules", "", "YAML or JSON file mapping external metric names to PromQL templates (required)")
	fs.StringVar(&a.promURL, "prometheus-url", "http://127.0.0.1:9090", "Prometheus base URL")
	fs.StringVar(&a.kubeconfig, "kubeconfig", "", "kubeconfig used for --lister-kubeconfig, --authentication-kubeconfig "+
		"and --authorization-kubeconfig where those are not given (out-of-cluster runs)")
	logs.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		klog.Fatalf("parsing flags: %v", err)
	}
	if a.kubeconfig != "" {
		for _, p := range []*string{&a.RemoteKubeConfigFile, &a.Authentication.RemoteKubeConfigFile, &a.Authorization.RemoteKubeConfigFile} {
			if *p == "" {
				*p = a.kubeconfig
			}
		}
	}
	if a.rulesPath == "" {
		klog.Fatal("--rules is required")
	}
	names, queries, err := loadRules(a.rulesPath)
	if err != nil {
		klog.Fatalf("loading rules: %v", err)
	}
	a.WithExternalMetrics(&promProvider{
		promURL: strings.TrimRight(a.promURL, "/"),
		client:  &http.Client{Timeout: 15 * time.Second},
		names:   names,
		queries: queries,
	})
	if err := metrics.RegisterMetrics(legacyregistry.Register); err != nil {
		klog.Fatalf("registering metrics: %v", err)
	}
	klog.InfoS("Serving external metrics", "metrics", names, "prometheus", a.promURL)
	if err := a.Run(context.Background()); err != nil {
		klog.Fatalf("running the adapter: %v", err)
	}
}
