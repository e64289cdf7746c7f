package jepsen

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// restClient makes the administrator's management calls.
var restClient = &http.Client{Timeout: 30 * time.Second}

// restError is a management call answered with a status other than 2xx.
type restError struct {
	method, path string
	status       int
	body         string
}

func (e *restError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.path, e.status, strings.TrimSpace(e.body))
}

func restCall(n *node, method, path string, form url.Values) ([]byte, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, "http://"+n.mgmtAddr()+path, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.SetBasicAuth(adminUser, adminPassword)
	resp, err := restClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return raw, &restError{method: method, path: path, status: resp.StatusCode, body: string(raw)}
	}
	return raw, nil
}

func restPost(n *node, path string, form url.Values) error {
	_, err := restCall(n, http.MethodPost, path, form)
	return err
}

func restGet(n *node, path string, out any) error {
	raw, err := restCall(n, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// poolNode is one entry of `GET /pools/default`'s `nodes`.
type poolNode struct {
	Hostname          string `json:"hostname"`
	OtpNode           string `json:"otpNode"`
	Status            string `json:"status"`
	ClusterMembership string `json:"clusterMembership"`
	RecoveryType      string `json:"recoveryType"`
}

// pool is what `GET /pools/default` says of the cluster.
type pool struct {
	Nodes    []poolNode `json:"nodes"`
	Balanced bool       `json:"balanced"`
}

// poolNodes is the cluster's node list as `n` sees it.
func poolNodes(n *node) ([]poolNode, error) {
	p, err := poolOf(n)
	return p.Nodes, err
}

func poolOf(n *node) (pool, error) {
	var p pool
	err := restGet(n, "/pools/default", &p)
	return p, err
}

// rebalanceTask is the rebalance entry of `GET /pools/default/tasks` on the node that orchestrates it.
type rebalanceTask struct {
	Status       string  `json:"status"`
	Progress     float64 `json:"progress"`
	ErrorMessage string  `json:"errorMessage"`
	MovesDone    int     `json:"movesDone"`
	MovesTotal   int     `json:"movesTotal"`
}

func rebalanceStatus(n *node) (rebalanceTask, error) {
	var tasks []rebalanceTask
	if err := restGet(n, "/pools/default/tasks", &tasks); err != nil {
		return rebalanceTask{}, err
	}
	if len(tasks) == 0 {
		return rebalanceTask{}, fmt.Errorf("%s: no rebalance task", n)
	}
	return tasks[0], nil
}

// vbucketMap is a bucket's `vBucketServerMap`: for each vBucket, indexes into ServerList ("host:kvport"), the
// active first; -1 for a missing copy.
type vbucketMap struct {
	ServerList []string `json:"serverList"`
	VBucketMap [][]int  `json:"vBucketMap"`
}

func bucketMap(n *node, bucket string) (vbucketMap, error) {
	var terse struct {
		Map vbucketMap `json:"vBucketServerMap"`
	}
	err := restGet(n, "/pools/default/b/"+bucket, &terse)
	return terse.Map, err
}
