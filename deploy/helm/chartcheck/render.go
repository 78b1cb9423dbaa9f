package chartcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// KubeVersion is the Kubernetes version the chart is rendered for: the
// oldest it supports (Chart.yaml kubeVersion; the pod-index label).
const KubeVersion = "v1.28.0"

// Object is one rendered manifest, decoded into its k8s.io/api type.
type Object struct {
	Kind   string
	Name   string
	Source string // the template that rendered it
	Hook   bool   // a Helm hook (rendered apart from the release manifest)
	Obj    any    // *appsv1.StatefulSet, *corev1.Service, ...
}

// kinds maps apiVersion/kind to a new value of its type. A kind missing here
// fails the check: add it (and its checks) when the chart grows one.
var kinds = map[string]func() any{
	"v1/ConfigMap":                  func() any { return new(corev1.ConfigMap) },
	"v1/Service":                    func() any { return new(corev1.Service) },
	"v1/Secret":                     func() any { return new(corev1.Secret) },
	"v1/ServiceAccount":             func() any { return new(corev1.ServiceAccount) },
	"apps/v1/StatefulSet":           func() any { return new(appsv1.StatefulSet) },
	"policy/v1/PodDisruptionBudget": func() any { return new(policyv1.PodDisruptionBudget) },
	"batch/v1/Job":                  func() any { return new(batchv1.Job) },
}

// Render renders the chart at dir as `helm template` does (client only,
// release name and namespace given), with the values files in order, and
// decodes every object strictly.
func Render(dir, releaseName, namespace string, valuesFiles ...string) ([]Object, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	vals, err := readValues(valuesFiles)
	if err != nil {
		return nil, err
	}
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	inst := action.NewInstall(cfg)
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	inst.Replace = true
	inst.KubeVersion = kv
	r, err := inst.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("render: unexpected release type %T", r)
	}
	objs, err := Decode("manifest", rel.Manifest, false)
	if err != nil {
		return nil, err
	}
	for _, h := range rel.Hooks {
		ho, err := Decode(h.Path, h.Manifest, true)
		if err != nil {
			return nil, err
		}
		objs = append(objs, ho...)
	}
	return objs, nil
}

// Lint is `helm lint --strict` with the values files: every warning and
// error, as messages.
func Lint(dir string, valuesFiles ...string) ([]string, error) {
	vals, err := readValues(valuesFiles)
	if err != nil {
		return nil, err
	}
	l := action.NewLint()
	l.Strict = true
	l.Namespace = "twinlog"
	res := l.Run([]string{dir}, vals)
	var out []string
	for _, e := range res.Errors {
		out = append(out, e.Error())
	}
	return out, nil
}

func readValues(files []string) (map[string]any, error) {
	vals := map[string]any{}
	for _, f := range files {
		v, err := common.ReadValuesFile(f)
		if err != nil {
			return nil, err
		}
		vals = mergeMaps(vals, v.AsMap())
	}
	return vals, nil
}

// mergeMaps merges b into a, b winning, as helm's -f does for later files.
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// Decode splits a rendered stream into documents and decodes each strictly
// (unknown or duplicate fields are errors) into its k8s.io/api type.
func Decode(source, stream string, hook bool) ([]Object, error) {
	rd := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var out []Object
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		src := source
		if i := bytes.Index(doc, []byte("# Source: ")); i >= 0 {
			line, _, _ := bytes.Cut(doc[i+len("# Source: "):], []byte("\n"))
			src = string(line)
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		if string(js) == "null" {
			continue // only comments
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		mk, ok := kinds[meta.APIVersion+"/"+meta.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: unknown kind %s/%s (name %q): add it to chartcheck's kinds", src, meta.APIVersion, meta.Kind, meta.Metadata.Name)
		}
		// Decoded as the API server decodes: field names are case
		// sensitive (encoding/json would take clusterIp for clusterIP),
		// unknown and duplicate fields are errors.
		obj := mk()
		strict, err := sigsjson.UnmarshalStrict(js, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err == nil {
			err = errors.Join(strict...)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s %q: %w", src, meta.Kind, meta.Metadata.Name, err)
		}
		out = append(out, Object{Kind: meta.Kind, Name: meta.Metadata.Name, Source: src, Hook: hook, Obj: obj})
	}
}
