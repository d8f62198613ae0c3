"""What the cloud member writes, without an API server: a NodeClaim from a pool, a virtual node from a cloud
Node, a cloud pod from an IDC pod, and the status patch back (tidegate/kube/nodeclaims.py, virtual_nodes.py,
pod_mirror.py). The member itself, against two real API servers, is in test_kube_cloud_member.py."""

from __future__ import annotations

from typing import Any

from tidegate.fleet.pool import Pool
from tidegate.fleet.spec import ClusterSpec, GpuSpec, InterruptionSpec, NodePoolSpec, PricingSpec
from tidegate.kube.nodeclaims import nodeclaim
from tidegate.kube.pod_mirror import cloud_pod, lost_status, status_patch
from tidegate.kube.virtual_nodes import merged_taints, notice_taints, virtual_node

CLUSTER = ClusterSpec(type="cloud", provider="aws", region="us-east-1", latency_ms=2)


def pool(model: str = "spot", **extra: Any) -> Pool:
    spec = NodePoolSpec(
        cluster="aws",
        gpu=GpuSpec(product="NVIDIA-A100-SXM4-40GB", count=8, memory_mib=40960),
        pricing=PricingSpec(model=model),  # type: ignore[arg-type]
        **extra,
    )
    return Pool("p4d", spec, "aws", CLUSTER)


def test_a_nodeclaim_names_the_instance_type_from_the_pool_s_label_or_its_interruption_model() -> None:
    by_label = nodeclaim(pool(labels={"node.kubernetes.io/instance-type": "p5.48xlarge"}), "p4d-abc", "aws")
    by_model = nodeclaim(pool(interruption=InterruptionSpec(instance_type="p4d.24xlarge")), "p4d-abc", "aws")
    neither = nodeclaim(pool("on-demand"), "p4d-abc", "aws")

    def required(claim: dict[str, Any]) -> dict[str, list[str]]:
        return {r["key"]: r["values"] for r in claim["spec"]["requirements"]}

    assert required(by_label)["node.kubernetes.io/instance-type"] == ["p5.48xlarge"]
    assert required(by_model)["node.kubernetes.io/instance-type"] == ["p4d.24xlarge"]
    assert required(neither) == {"karpenter.sh/capacity-type": ["on-demand"], "tidegate.io/pool": ["p4d"]}
    assert neither["metadata"]["labels"]["tidegate.io/cluster"] == "aws"
    assert neither["spec"]["resources"]["requests"] == {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}
    assert neither["spec"]["nodeClassRef"]["kind"] == "EC2NodeClass"


def test_a_virtual_node_takes_the_cloud_node_s_resources_and_derives_gpu_sharing_from_its_cards() -> None:
    cloud = {
        "metadata": {"labels": {"node.kubernetes.io/instance-type": "p4d.24xlarge", "secret": "x"}},
        "spec": {"taints": [{"key": "aws-node-termination-handler/spot-itn", "value": "e1", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "95", "nvidia.com/gpu": "4", "pods": "110"}, "nodeInfo": {"osImage": "x"}},
    }
    node = virtual_node(pool(), "p4d-abc", cloud, 1_700_000_000.0, "1.0")
    allocatable = node["status"]["allocatable"]
    assert allocatable["cpu"] == "95" and allocatable["nvidia.com/gpu"] == "4"  # the instance's, not the pool's
    assert allocatable["volcano.sh/gpu-number"] == "4" and allocatable["volcano.sh/gpu-memory"] == str(4 * 40960)
    assert allocatable["memory"] == "768Gi"  # what the cloud Node does not say comes from the pool
    labels = node["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "p4d.24xlarge" and "secret" not in labels
    assert node["metadata"]["annotations"]["tidegate.io/interruption-noticed-at"] == "2023-11-14T22:13:20Z"
    assert [t["key"] for t in node["spec"]["taints"]] == ["cloud.provider", "aws-node-termination-handler/spot-itn"]
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "tidegate-cloud-member/1.0"
    assert notice_taints({"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}}) == [
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
    ]


def test_the_member_s_taints_replace_its_own_and_lift_not_ready_only_from_a_ready_node() -> None:
    current = [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
        {"key": "cloud.provider", "value": "old", "effect": "NoSchedule"},
    ]
    ours = [{"key": "cloud.provider", "value": "aws", "effect": "NoSchedule"}]
    assert [t["key"] for t in merged_taints(current, ours, ready=True)] == ["dedicated", "cloud.provider"]
    assert [t.get("value") for t in merged_taints(current, ours, ready=False)] == [None, "ml", "aws"]


def test_a_cloud_pod_leaves_out_placement_priority_and_the_idc_s_service_account_token() -> None:
    token = "/var/run/secrets/kubernetes.io/serviceaccount"
    idc = {
        "metadata": {"name": "w", "namespace": "ml", "uid": "u-1", "labels": {"app": "x"}, "resourceVersion": "9"},
        "spec": {
            "nodeName": "p4d-abc",
            "schedulerName": "volcano",
            "priorityClassName": "high",
            "priority": 1000,
            "serviceAccountName": "trainer",
            "nodeSelector": {"volcano.sh/node-type": "cloud-spot"},
            "affinity": {"nodeAffinity": {}},
            "containers": [
                {
                    "name": "main",
                    "volumeMounts": [
                        {"name": "kube-api-access-x", "mountPath": token},
                        {"name": "data", "mountPath": "/d"},
                    ],
                }
            ],
            "volumes": [{"name": "kube-api-access-x", "projected": {}}, {"name": "data", "emptyDir": {}}],
        },
        "status": {"phase": "Pending"},
    }
    made = cloud_pod(idc, "ip-10-0-0-1.ec2.internal")
    assert made["metadata"] == {
        "name": "w",
        "namespace": "ml",
        "labels": {"app": "x", "tidegate.io/idc-uid": "u-1", "app.kubernetes.io/managed-by": "tidegate"},
        "annotations": {},
    }
    spec = made["spec"]
    assert spec["nodeName"] == "ip-10-0-0-1.ec2.internal"
    for field in ("schedulerName", "priorityClassName", "priority", "serviceAccountName", "nodeSelector", "affinity"):
        assert field not in spec
    assert spec["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/d"}]
    assert spec["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert idc["spec"]["volumes"][0]["name"] == "kube-api-access-x"  # the IDC pod's document is left as it was


def test_the_status_patch_says_only_what_differs_and_replaces_the_pod_ips() -> None:
    cloud = {
        "phase": "Running",
        "podIP": "10.1.0.2",
        "podIPs": [{"ip": "10.1.0.2"}],
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    idc = {
        "phase": "Pending",
        "podIP": "10.1.0.1",
        "podIPs": [{"ip": "10.1.0.1"}],
        "reason": "x",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
    }
    patch = status_patch(idc, cloud)
    assert patch == {
        "phase": "Running",
        "podIP": "10.1.0.2",
        "podIPs": [{"$patch": "replace"}, {"ip": "10.1.0.2"}],
        "reason": None,
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    mirrored = {**idc, **cloud, "reason": None, "conditions": idc["conditions"] + cloud["conditions"]}
    assert status_patch(mirrored, cloud) is None  # the IDC's own conditions stay, and do not count


def test_a_lost_pod_fails_with_its_running_containers_killed() -> None:
    status = {
        "containerStatuses": [
            {"name": "a", "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}, "ready": True},
            {"name": "b", "state": {"terminated": {"exitCode": 0}}, "ready": False},
        ]
    }
    lost = lost_status("NodeLost", "gone", status)
    assert lost["phase"] == "Failed" and lost["reason"] == "NodeLost"
    assert lost["containerStatuses"][0]["state"]["terminated"] == {
        "exitCode": 137,
        "reason": "NodeLost",
        "message": "gone",
        "startedAt": "2024-01-01T00:00:00Z",
    }
    assert lost["containerStatuses"][1] == status["containerStatuses"][1]
