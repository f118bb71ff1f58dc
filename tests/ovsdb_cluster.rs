//! A 3-member Raft cluster on 127.0.0.1: a leader-only client follows leadership when the
//! leader is killed, and loses no update written across the failover.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod ovsdb_support;

use std::time::{Duration, Instant};

use ovn_bgp_agent::caps::ovsdb::*;
use ovsdb_support::*;

fn leader_only(remotes: &str) -> ClientConfig {
    let mut c = ClientConfig::new(remotes, "OVN_Northbound").unwrap();
    c.leader_only = true;
    c.backoff_initial = Duration::from_millis(50);
    c.backoff_max = Duration::from_millis(400);
    c.probe_interval = Some(Duration::from_secs(2));
    c
}

fn spec() -> MonitorSpec {
    MonitorSpec::default()
        .table(TableSpec::new("Logical_Switch", &["name"]))
        .index("Logical_Switch", "name")
}

/// Inserts `seq-N` exactly once, retrying across the failover (a `wait` makes a retry of a
/// transaction that did commit fail harmlessly instead of inserting twice).
async fn write_seq(writer: &OvsdbClient, n: usize) {
    let name = format!("seq-{n:04}");
    let start = Instant::now();
    loop {
        let ops = vec![
            Op::wait("Logical_Switch", &["name"], vec![])
                .where_eq("name", name.as_str())
                .timeout_ms(0),
            Op::insert("Logical_Switch").set("name", name.as_str()),
        ];
        match tokio::time::timeout(Duration::from_secs(3), writer.transact(ops)).await {
            Ok(Ok(_)) => return,
            Ok(Err(OvsdbError::Transaction(e))) if e.contains("timed out") => return,
            Ok(Err(_)) | Err(_) => {
                assert!(
                    start.elapsed() < Duration::from_secs(40),
                    "cannot write {name} for 40 s"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_only_client_follows_failover_without_losing_updates() {
    let mut cluster = Cluster::new(
        NB_SCHEMA,
        "OVN_Northbound",
        &[(16670, 16671), (16672, 16673), (16674, 16675)],
    );
    let leader = cluster.wait_ready("OVN_Northbound");
    let remotes = cluster.remotes();

    let reader = OvsdbClient::connect(leader_only(&remotes), spec())
        .await
        .unwrap();
    let leader_remote = cluster.members[leader].tcp_remote();
    assert_eq!(
        reader.stats().current_remote.as_deref(),
        Some(leader_remote.as_str())
    );
    let mut events = reader.events().unwrap();
    let writer = OvsdbClient::connect(leader_only(&remotes), spec())
        .await
        .unwrap();

    const N: usize = 60;
    let write = async {
        for n in 0..N {
            if n == 20 {
                cluster.members[leader].kill();
            }
            write_seq(&writer, n).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let read = async {
        let mut seen: Vec<String> = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        while seen.len() < N {
            let batch = tokio::time::timeout_at(deadline, events.recv())
                .await
                .unwrap_or_else(|_| panic!("only {} of {N} updates seen: {seen:?}", seen.len()))
                .unwrap();
            // One batch is one transaction, or the transactions replayed on resume merged
            // into one state change: rows inside a batch have no order, batches do.
            let mut in_batch: Vec<String> = batch
                .changes
                .iter()
                .filter_map(|ch| match &ch.kind {
                    ChangeKind::Insert { new } => Some(new.str("name").to_owned()),
                    _ => None,
                })
                .collect();
            in_batch.sort();
            seen.extend(in_batch);
        }
        seen
    };
    let ((), seen) = tokio::join!(write, read);
    let expected: Vec<String> = (0..N).map(|n| format!("seq-{n:04}")).collect();
    assert_eq!(seen, expected, "updates lost, duplicated or out of order");

    let stats = reader.stats();
    assert!(stats.sessions >= 2, "{stats:?}");
    assert_ne!(
        stats.current_remote.as_deref(),
        Some(leader_remote.as_str())
    );
    let new_leader = cluster.leader("OVN_Northbound").expect("a new leader");
    assert_eq!(
        stats.current_remote.as_deref(),
        Some(cluster.members[new_leader].tcp_remote().as_str()),
        "client is not on the new leader: {stats:?}"
    );
    assert!(
        stats.resumed >= 1,
        "the new leader shares the Raft history: expected a resume, got {stats:?}"
    );
    assert_eq!(
        reader.replica().get_table("Logical_Switch").unwrap().len(),
        N
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_cut_off_from_its_cluster_is_skipped() {
    let mut cluster = Cluster::new(
        NB_SCHEMA,
        "OVN_Northbound",
        &[(16690, 16691), (16692, 16693), (16694, 16695)],
    );
    cluster.wait_ready("OVN_Northbound");
    // Leave member 2 alone: without a majority it is no longer connected to the cluster.
    cluster.members[0].kill();
    cluster.members[1].kill();
    let lonely = cluster.members[2].tcp_remote();
    // Raft needs a couple of election timeouts before the survivor admits it is cut off.
    let start = Instant::now();
    loop {
        let out = run(
            "ovsdb-client",
            &[
                "transact",
                &lonely,
                r#"["_Server",{"op":"select","table":"Database","where":[["name","==","OVN_Northbound"]],"columns":["connected"]}]"#,
            ],
        );
        if out.contains("\"connected\":false") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "survivor never reported itself disconnected: {out}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut cfg = ClientConfig::new(&lonely, "OVN_Northbound").unwrap();
    cfg.backoff_initial = Duration::from_millis(50);
    cfg.backoff_max = Duration::from_millis(300);
    // Not leader-only: any member will do, as long as it is part of a working cluster.
    let pending = tokio::spawn(OvsdbClient::connect(cfg, spec()));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        !pending.is_finished(),
        "client accepted a member that is not connected to its cluster"
    );
    // Quorum comes back: the member rejoins and the client gets its replica.
    cluster.members[0].start();
    let client = tokio::time::timeout(Duration::from_secs(40), pending)
        .await
        .expect("client did not connect after the cluster recovered")
        .unwrap()
        .expect("connect");
    let stats = client.stats();
    assert!(stats.servers_skipped >= 1, "{stats:?}");
    assert!(
        stats
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("not connected to its cluster"),
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_only_client_follows_leadership_moving_without_a_crash() {
    let mut cluster = Cluster::new(
        NB_SCHEMA,
        "OVN_Northbound",
        &[(16682, 16683), (16684, 16685), (16686, 16687)],
    );
    let leader = cluster.wait_ready("OVN_Northbound");
    let remotes = cluster.remotes();
    let reader = OvsdbClient::connect(leader_only(&remotes), spec())
        .await
        .unwrap();
    let old_remote = cluster.members[leader].tcp_remote();
    assert_eq!(
        reader.stats().current_remote.as_deref(),
        Some(old_remote.as_str())
    );
    let mut events = reader.events().unwrap();
    events.recv().await.unwrap();

    // The leader leaves the cluster but keeps running: only `_Server` tells the client.
    run(
        "ovs-appctl",
        &[
            "-t",
            cluster.members[leader]
                .dir
                .path()
                .join("ctl")
                .to_str()
                .unwrap(),
            "cluster/leave",
            "OVN_Northbound",
        ],
    );
    let start = Instant::now();
    loop {
        let s = reader.stats();
        if s.sessions >= 2
            && reader.is_connected()
            && s.current_remote.as_deref() != Some(&old_remote)
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "client stayed on the old leader: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        cluster.members[leader].alive(),
        "the old leader must still be running (only _Server told the client to move)"
    );
    let s = reader.stats();
    // Every session end was a `_Server` verdict (not the connection dropping).
    assert!(
        s.servers_skipped >= 1 && s.failures == s.servers_skipped,
        "{s:?}"
    );
    assert!(s.resumed >= 1, "the new leader shares the history: {s:?}");
    // Updates written through the new leader reach the client.
    let others: Vec<String> = (0..3)
        .filter(|&i| i != leader)
        .map(|i| cluster.members[i].tcp_remote())
        .collect();
    let writer = OvsdbClient::connect(leader_only(&others.join(",")), spec())
        .await
        .unwrap();
    write_seq(&writer, 1).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let b = tokio::time::timeout_at(deadline, events.recv())
            .await
            .expect("update after the leadership move not seen")
            .unwrap();
        if b.changes
            .iter()
            .any(|c| c.new_row().is_some_and(|r| r.str("name") == "seq-0001"))
        {
            break;
        }
    }
}
