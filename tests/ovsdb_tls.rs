//! `ssl:` remotes through rustls against a real `ovsdb-server` with `pssl:`, using PEM key,
//! certificate and CA files as the `[ovn] ovn_sb_*` options name them.

// Real daemons and benchmarks run on the wall clock, not on tokio's pausable one.
#![allow(clippy::disallowed_types)]

mod ovsdb_support;

use std::time::Duration;

use ovn_bgp_agent::caps::ovsdb::*;
use ovsdb_support::*;

#[tokio::test]
async fn ssl_remote_with_client_certificate() {
    let pki = Pki::new();
    let port = 16680;
    let sb = OvsdbServer::standalone_with(
        SB_SCHEMA,
        "tls",
        vec![
            format!("--remote=pssl:{port}:127.0.0.1"),
            format!("--private-key={}", pki.file("server.key").display()),
            format!("--certificate={}", pki.file("server.crt").display()),
            format!("--ca-cert={}", pki.file("ca.crt").display()),
        ],
    );
    // Wait for the TLS listener.
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "pssl listener did not come up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cfg = ClientConfig::new(&format!("ssl:127.0.0.1:{port}"), "OVN_Southbound").unwrap();
    cfg.tls = Some(TlsFiles {
        private_key: pki.file("client.key"),
        certificate: pki.file("client.crt"),
        ca_cert: pki.file("ca.crt"),
    });
    let spec = MonitorSpec::default().table(TableSpec::new("SB_Global", &["nb_cfg", "options"]));
    let c = tokio::time::timeout(Duration::from_secs(20), OvsdbClient::connect(cfg, spec))
        .await
        .expect("TLS connect timed out")
        .expect("TLS connect");
    let mut ev = c.events().unwrap();
    assert_eq!(ev.recv().await.unwrap().kind, BatchKind::Initial);
    c.transact(vec![
        Op::insert("SB_Global").set("options", Datum::map([("k", "v")])),
    ])
    .await
    .unwrap();
    let b = ev.recv().await.unwrap();
    assert_eq!(
        b.changes[0].new_row().unwrap().map_get("options", "k"),
        Some("v")
    );
    drop(sb);

    // A client without the right CA is refused, and the error says TLS.
    let mut cfg = ClientConfig::new(&format!("ssl:127.0.0.1:{port}"), "OVN_Southbound").unwrap();
    cfg.tls = Some(TlsFiles {
        private_key: pki.file("client.key"),
        certificate: pki.file("client.crt"),
        ca_cert: pki.file("missing-ca.crt"),
    });
    let err = tokio::time::timeout(
        Duration::from_secs(5),
        OvsdbClient::connect(
            cfg,
            MonitorSpec::default().table(TableSpec::new("SB_Global", &["nb_cfg"])),
        ),
    )
    .await;
    // The missing CA file is a configuration error the client reports (not a hang).
    let err = err
        .expect("missing CA must not hang")
        .err()
        .expect("must fail");
    assert!(err.to_string().contains("missing-ca.crt"), "{err}");
}
