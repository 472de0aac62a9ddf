"""Unit tests of the virt-handler stand-in's logic (no launcher): the
strict Go decoding, the marshalled VMI, the grace-period arithmetic, the
phase mapping and the domain checks. Run: python3 -m unittest discover
tests/handler (the e2e suite runs them: protocol::stand_in_unit_tests)."""

import json
import os
import sys
import unittest
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from virt_handler import gotypes  # noqa: E402
from virt_handler.cmdclient import go_quote  # noqa: E402
from virt_handler.controller import Controller, agent_supported  # noqa: E402
from virt_handler.notify import check_domain  # noqa: E402
from virt_handler.vmi import Cluster, marshal  # noqa: E402

UID = "u-1"


def domain(status="Running", reason="Unknown", grace=None, **spec):
    d = {"kind": "Domain", "apiVersion": "1.2.2",
         "ObjectMeta": {"name": "vm", "namespace": "ns", "uid": UID, "creationTimestamp": None},
         "Spec": {"Name": "ns_vm", "Memory": {"Value": 134217728, "Unit": "b"},
                  "Devices": {"Interfaces": None, "Disks": None},
                  "Metadata": {"KubeVirt": {"UID": UID, "GracePeriod": grace, "Migration": None,
                                            "AccessCredential": None, "MemoryDump": None}},
                  "Features": {"ACPI": {}}, **spec},
         "Status": {"Status": status, "Reason": reason, "Interfaces": None,
                    "OSInfo": {"Name": ""}, "FSFreezeStatus": {"Status": ""}}}
    return d


class GoTypes(unittest.TestCase):
    def test_a_well_formed_domain_decodes(self):
        d = domain(grace={"DeletionGracePeriodSeconds": 30, "DeletionTimestamp": "2026-01-02T03:04:05Z",
                          "MarkedForGracefulShutdown": True})
        self.assertEqual(gotypes.decode(json.dumps(d), gotypes.DOMAIN, "d")["Status"]["Status"], "Running")

    def test_keys_are_case_sensitive_and_unknown_keys_are_reported(self):
        d = domain()
        d["ObjectMeta"]["Uid"] = "x"
        d["Spec"]["Metadata"]["KubeVirt"]["Graceperiod"] = None
        with self.assertRaises(gotypes.GoDecodeError) as e:
            gotypes.decode(json.dumps(d), gotypes.DOMAIN, "d")
        self.assertFalse(e.exception.go_fails)  # Go drops them silently
        text = str(e.exception)
        self.assertIn(".ObjectMeta.Uid", text)
        self.assertIn("the Go field is 'uid'", text)
        self.assertIn(".Spec.Metadata.KubeVirt.Graceperiod", text)

    def test_wrong_json_types_fail_as_in_go(self):
        cases = [
            (("Spec", "Memory", "Value"), 1.5, "not an integer literal"),
            (("Spec", "Memory", "Value"), -1, "overflows Go uint64"),
            (("Spec", "Metadata", "KubeVirt", "GracePeriod"),
             {"DeletionGracePeriodSeconds": "30"}, "string into Go int64"),
            (("Spec", "Metadata", "KubeVirt", "GracePeriod"),
             {"DeletionTimestamp": "2026-01-02 03:04:05"}, "is not RFC 3339"),
            (("Spec", "Metadata", "KubeVirt", "GracePeriod"),
             {"MarkedForGracefulShutdown": "true"}, "string into Go bool"),
            (("Status", "Status"), 1, "number into Go string"),
        ]
        for path, value, want in cases:
            d = domain()
            o = d
            for k in path[:-1]:
                o = o[k]
            o[path[-1]] = value
            with self.assertRaises(gotypes.GoDecodeError, msg=str(path)) as e:
                gotypes.decode(json.dumps(d), gotypes.DOMAIN, "d")
            self.assertTrue(e.exception.go_fails, path)
            self.assertIn(want, str(e.exception))

    def test_null_and_repeated_keys(self):
        gotypes.decode('{"Spec": null, "Status": {"Interfaces": null}}', gotypes.DOMAIN, "d")
        with self.assertRaises(gotypes.GoDecodeError) as e:
            gotypes.decode('{"Status": {"Status": "Running", "Status": "Paused"}}', gotypes.DOMAIN, "d")
        self.assertIn("key given twice", str(e.exception))

    def test_micro_time_needs_six_digits(self):
        ev = {"involvedObject": {"uid": "u"}, "eventTime": "2026-01-02T03:04:05Z"}
        with self.assertRaises(gotypes.GoDecodeError):
            gotypes.decode(json.dumps(ev), gotypes.K8S_EVENT, "e")
        ev["eventTime"] = "2026-01-02T03:04:05.123456Z"
        gotypes.decode(json.dumps(ev), gotypes.K8S_EVENT, "e")

    def test_stats_and_guest_agent_shapes(self):
        gotypes.decode("null", gotypes.DOMAIN_STATS, "s")
        gotypes.decode('{"Cpu": {"TimeSet": true, "Time": 5}, "CPUMap": [[true]], "Block": '
                       '[{"Alias": "a", "NameSet": true}]}', gotypes.DOMAIN_STATS, "s")
        with self.assertRaises(gotypes.GoDecodeError):
            gotypes.decode('{"Block": [{"AliasSet": true}]}', gotypes.DOMAIN_STATS, "s")
        gotypes.decode('{"guestAgentVersion": "8", "timezone": "UTC, 0", "fsInfo": {"disks": '
                       '[{"diskName": "vda", "usedBytes": 1, "disk": [{"busType": "virtio"}]}]}}',
                       gotypes.GUEST_AGENT_INFO, "g")
        gotypes.decode('[{"userName": "root", "loginTime": 1.5}]', gotypes.GUEST_OS_USER_LIST, "u")


class Vmi(unittest.TestCase):
    def manifest(self, **spec):
        return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "metadata": {"name": "vm", "namespace": "ns", "uid": UID},
                "spec": {"terminationGracePeriodSeconds": 5,
                         "domain": {"memory": {"guest": "128Mi"}, "cpu": {"cores": 1}},
                         "volumes": [{"name": "b", "emptyDisk": {}}, {"name": "a", "containerDisk": {}}],
                         **spec}}

    def test_the_informer_object_has_no_type_meta_and_the_cluster_fields(self):
        c = Cluster(self.manifest(), "node1", "pod-1", owner_vm={"name": "vm", "uid": "vm-uid"})
        v = json.loads(marshal(c.get()))
        self.assertNotIn("kind", v)
        self.assertNotIn("apiVersion", v)
        m = v["metadata"]
        self.assertEqual(m["finalizers"], ["kubevirt.io/virtualMachineControllerFinalize",
                                           "foregroundDeleteVirtualMachine"])
        self.assertEqual(m["ownerReferences"][0]["kind"], "VirtualMachine")
        self.assertEqual(m["labels"]["kubevirt.io/nodeName"], "node1")
        self.assertEqual(m["annotations"]["kubevirt.io/latest-observed-api-version"], "v1")
        self.assertEqual(m["generation"], 1)
        self.assertTrue(m["resourceVersion"])
        st = v["status"]
        self.assertEqual((st["phase"], st["activePods"], st["runtimeUser"]), ("Scheduled", {"pod-1": "node1"}, 0))
        self.assertEqual([x["name"] for x in st["volumeStatus"]], ["a", "b"])
        self.assertEqual(st["currentCPUTopology"], {"cores": 1})
        self.assertEqual(st["memory"]["guestAtBoot"], "128Mi")
        ready = st["conditions"][0]
        self.assertEqual((ready["type"], ready["status"], ready["reason"]), ("Ready", "False", "GuestNotRunning"))
        rv = m["resourceVersion"]
        c.delete()
        m = json.loads(marshal(c.get()))["metadata"]
        self.assertNotEqual(m["resourceVersion"], rv)
        self.assertEqual(m["deletionGracePeriodSeconds"], 0)
        self.assertTrue(m["deletionTimestamp"])


class Decisions(unittest.TestCase):
    def test_grace_period_counts_whole_seconds_from_the_recorded_timestamp(self):
        rec = "2026-01-02T03:04:05Z"
        start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp()
        d = domain(grace={"DeletionGracePeriodSeconds": 30, "DeletionTimestamp": rec})
        self.assertEqual(Controller.grace_period_expired(5, d, start + 4.99), (False, 1))
        self.assertEqual(Controller.grace_period_expired(5, d, start + 5), (True, 0))
        self.assertEqual(Controller.grace_period_expired(None, d, start + 10), (False, 20))
        nots = domain(grace={"DeletionGracePeriodSeconds": 30})
        self.assertEqual(Controller.grace_period_expired(5, nots, start), (False, -1))
        self.assertEqual(Controller.grace_period_expired(0, nots, start), (True, 0))

    def test_phase_from_the_domain(self):
        c = Controller.__new__(Controller)
        vmi = {"spec": {"terminationGracePeriodSeconds": 5}, "status": {"phase": "Running"}}
        grace = {"DeletionGracePeriodSeconds": 5}
        want = {("Running", "Unknown"): "Running", ("Paused", "User"): "Running",
                ("Paused", "PostcopyFailed"): "Failed", ("Shutoff", "Shutdown"): "Succeeded",
                ("Shutoff", "Destroyed"): "Failed", ("Shutoff", "Crashed"): "Failed",
                ("Crashed", "Panicked"): "Failed", ("Shutoff", "Migrated"): "Running",
                ("ShuttingDown", "User"): "Running"}
        for (st, r), p in want.items():
            self.assertEqual(c.phase_for(domain(st, r, grace), vmi), p, (st, r))
        # Without ACPI a destroyed domain succeeded.
        self.assertEqual(c.phase_for(domain("Shutoff", "Destroyed", grace, Features=None), vmi), "Succeeded")

    def test_shutdown_loop(self):
        """processVmShutdown with a recording client: Shutdown while the
        grace period runs (requeued within 5 s), nothing while the domain is
        ShuttingDown, Kill once expired."""
        class Client:
            def __init__(self):
                self.calls = []

            def shutdown_virtual_machine(self, _):
                self.calls.append("Shutdown")

            def kill_virtual_machine(self, _):
                self.calls.append("Kill")

        class Clients:
            def __init__(self, c):
                self.c = c

            def get_verified(self, _vmi):
                return self.c

        client = Client()
        c = Controller.__new__(Controller)
        c.clients = Clients(client)
        c.recorded = []
        from virt_handler.controller import WorkQueue
        c.queue = WorkQueue()
        vmi = {"metadata": {"name": "vm", "namespace": "ns", "uid": UID}, "spec":
               {"terminationGracePeriodSeconds": 5}, "status": {"phase": "Running"}}
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        grace = {"DeletionGracePeriodSeconds": 5}
        c.process_shutdown(vmi, domain(grace=grace))  # nothing recorded yet
        self.assertEqual(client.calls, ["Shutdown"])
        self.assertLessEqual(c.queue.due - datetime.now().timestamp(), 5.01)
        c.process_shutdown(vmi, domain("ShuttingDown", "User", dict(grace, DeletionTimestamp=now)))
        self.assertEqual(client.calls, ["Shutdown"])
        c.process_shutdown(vmi, domain(grace=dict(grace, DeletionTimestamp=now)))
        self.assertEqual(client.calls, ["Shutdown", "Shutdown"])
        c.process_shutdown(vmi, domain(grace=dict(grace, DeletionTimestamp="2000-01-01T00:00:00Z")))
        self.assertEqual(client.calls, ["Shutdown", "Shutdown", "Kill"])

    def test_domain_checks(self):
        self.assertEqual(check_domain(domain(), "ns", "vm", UID), [])
        d = domain()
        d["Spec"]["Metadata"]["KubeVirt"]["UID"] = ""
        d["Spec"]["Devices"]["Interfaces"] = [{"Alias": None, "MAC": None}]
        d["Spec"]["Devices"]["Disks"] = [{"Source": {"File": "/x"}, "Alias": None}]
        p = " | ".join(check_domain(d, "ns", "vm", UID))
        for want in ("stale", "Interfaces[0].Alias", "Interfaces[0].MAC", "Disks[0].Alias"):
            self.assertIn(want, p)

    def test_agent_support_and_go_quoting(self):
        ok, _ = agent_supported({"spec": {}}, [{"name": n, "enabled": True} for n in (
            "guest-ping", "guest-get-time", "guest-info", "guest-shutdown", "guest-network-get-interfaces",
            "guest-get-fsinfo", "guest-get-host-name", "guest-get-users", "guest-get-timezone",
            "guest-get-osinfo")])
        self.assertTrue(ok)
        self.assertFalse(agent_supported({"spec": {}}, [{"name": "guest-ping", "enabled": True}])[0])
        self.assertEqual(go_quote('a "b"\n'), '"a \\"b\\"\\n"')



class NicHotplug(unittest.TestCase):
    """filters.go's FilterNetsForLiveUpdate and netstat.go's merge of
    virt-controller's multus-status entries (KubeVirt v1.6.6)."""

    @staticmethod
    def vmi(state=None, sources=None):
        green = {"name": "green", "bridge": {}}
        if state:
            green["state"] = state
        v = {"spec": {"domain": {"devices": {"interfaces": [{"name": "default", "masquerade": {}}, green]}},
                      "networks": [{"name": "default", "pod": {}},
                                   {"name": "green", "multus": {"networkName": "ns/green"}}]},
             "status": {"interfaces": []}}
        if sources is not None:
            v["status"]["interfaces"] = [{"name": "green", "infoSource": sources,
                                          "podInterfaceName": "podba4788b226a"}]
        return v

    def test_nets_for_live_update(self):
        from virt_handler.netsetup import filter_nets_for_live_update as f
        self.assertEqual(f(self.vmi()), [])  # Multus has not reported the pod interface
        self.assertEqual(f(self.vmi(sources="multus-status")), ["green"])
        self.assertEqual(f(self.vmi(sources="domain, multus-status")), [])  # plugged
        self.assertEqual(f(self.vmi("absent", "domain, guest-agent, multus-status")), [])  # not detached yet
        self.assertEqual(f(self.vmi("absent", "multus-status")), ["green"])
        self.assertEqual(f(self.vmi("absent")), [])

    def test_status_keeps_multus_entries_and_pod_interface_names(self):
        from virt_handler.status import interfaces
        dom = {"Spec": {"Devices": {"Interfaces": [
            {"Alias": {"Name": "default"}, "MAC": {"MAC": "02:54:00:ab:cd:ef"}},
            {"Alias": {"Name": "green"}, "MAC": {"MAC": "0a:58:0a:f5:02:05"}}]}}, "Status": {}}
        v = self.vmi(sources="multus-status")
        interfaces(v, dom)
        green = v["status"]["interfaces"][1]
        self.assertEqual((green["name"], green["infoSource"], green["podInterfaceName"]),
                         ("green", "domain, multus-status", "podba4788b226a"))
        # Detached: the bare multus-status entry stays while the spec has it.
        v = self.vmi("absent", "domain, multus-status")
        dom["Spec"]["Devices"]["Interfaces"].pop()
        interfaces(v, dom)
        self.assertEqual(v["status"]["interfaces"][1],
                         {"name": "green", "infoSource": "multus-status", "podInterfaceName": "podba4788b226a"})


if __name__ == "__main__":
    unittest.main()
