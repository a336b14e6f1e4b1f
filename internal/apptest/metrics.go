package apptest

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one scrape of /metrics, parsed with the Prometheus text parser.
type Scrape map[string]*dto.MetricFamily

func (s *Server) Scrape(t testing.TB) Scrape {
	t.Helper()
	return ScrapeURL(t, s.URL+"/metrics")
}

func ScrapeURL(t testing.TB, url string) Scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// Value is the value of the series of a family whose labels include labels ("k=v" pairs);
// for a histogram, its count. A missing series is 0.
func (sc Scrape) Value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	fam, ok := sc[name]
	if !ok {
		return 0
	}
	total := 0.0
next:
	for _, m := range fam.GetMetric() {
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			match := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					match = true
				}
			}
			if !match {
				continue next
			}
		}
		switch fam.GetType() {
		case dto.MetricType_COUNTER:
			total += m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			total += m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			total += float64(m.GetHistogram().GetSampleCount())
		default:
			t.Fatalf("%s: unexpected type %s", name, fam.GetType())
		}
	}
	return total
}
