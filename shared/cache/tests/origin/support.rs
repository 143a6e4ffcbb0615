//! The tests' parts: an HTTPS origin on a 127.0.0.x address with per-path
//! scripts and counters (hyper's HTTP/1 server over tokio-rustls, its
//! certificate from a CA made with rcgen), and a client for it reached under
//! a foreign hostname (`registry.example.test`) through the scripted DNS and
//! the upstream's `connect` hook.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Frame;
use tfreg_cache::origin::{
    Connect, DownloadAnswer, OriginClient, OriginError, OriginSettings, Services, Timeouts,
};
use tfreg_model::address::{Platform, ProviderName};
use tfreg_model::upstream::UpstreamHost;
use tfreg_model::version::Version;
use tfreg_outbound::ScriptedLookup;
use tokio::time::Instant;

pub const HOST: &str = "registry.example.test";

/// A CA, and a server certificate it signed for `*.example.test`.
pub struct Pki {
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

impl Pki {
    pub fn new() -> Self {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![HOST.to_string(), "*.example.test".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        Self {
            ca_pem: ca.pem(),
            server: Arc::new(server),
        }
    }
}

/// What a path answers.
#[derive(Clone)]
pub struct Script {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

#[derive(Clone)]
pub enum Body {
    Bytes(Vec<u8>),
    /// Zeros, forever, chunked.
    Endless,
    /// One byte every `every`, forever.
    Drip(Duration),
    /// A `Content-Length` of this much, then 1 KiB and a stall.
    Claims(u64),
}

impl Script {
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Body::Bytes(Vec::new()),
        }
    }

    pub fn bytes(body: impl Into<Vec<u8>>) -> Self {
        Self {
            body: Body::Bytes(body.into()),
            ..Self::status(200)
        }
    }

    pub fn json(body: impl ToString) -> Self {
        Self::bytes(body.to_string()).header("content-type", "application/json")
    }

    pub fn redirect(status: u16, location: &str) -> Self {
        Self::status(status).header("location", location)
    }

    pub fn body(status: u16, body: Body) -> Self {
        Self {
            body,
            ..Self::status(status)
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// One request as the origin saw it.
#[derive(Debug, Clone)]
pub struct Hit {
    pub path: String,
    pub authorization: Option<String>,
    pub user_agent: Option<String>,
}

/// An HTTPS origin with scripted paths; unscripted ones answer 404. Each
/// connection serves one request (no keep-alive), so every request of the
/// client opens a connection and resolves its name again.
pub struct Origin {
    pub addr: SocketAddr,
    scripts: Arc<Mutex<HashMap<String, Script>>>,
    hits: Arc<Mutex<Vec<Hit>>>,
    accepts: Arc<AtomicUsize>,
}

type Reply = hyper::Response<UnsyncBoxBody<Bytes, Infallible>>;

impl Origin {
    pub async fn start(ip: &str, pki: &Pki) -> Self {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let origin = Self {
            addr: listener.local_addr().unwrap(),
            scripts: Arc::default(),
            hits: Arc::default(),
            accepts: Arc::default(),
        };
        let (scripts, hits, accepts) = (
            origin.scripts.clone(),
            origin.hits.clone(),
            origin.accepts.clone(),
        );
        let tls = tokio_rustls::TlsAcceptor::from(pki.server.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                accepts.fetch_add(1, Ordering::SeqCst);
                let (tls, scripts, hits) = (tls.clone(), scripts.clone(), hits.clone());
                tokio::spawn(async move {
                    let Ok(stream) = tls.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let reply = answer(&scripts, &hits, &req);
                        async move { Ok::<_, Infallible>(reply) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(false)
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        origin
    }

    pub fn script(&self, path: &str, script: Script) -> &Self {
        self.scripts
            .lock()
            .unwrap()
            .insert(path.to_string(), script);
        self
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// Requests for `path` (query included, if it has one).
    pub fn count(&self, path: &str) -> usize {
        self.hits().iter().filter(|h| h.path == path).count()
    }

    /// TCP connections accepted, whatever followed.
    pub fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }
}

fn answer(
    scripts: &Mutex<HashMap<String, Script>>,
    hits: &Mutex<Vec<Hit>>,
    req: &hyper::Request<hyper::body::Incoming>,
) -> Reply {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    hits.lock().unwrap().push(Hit {
        path: req.uri().path_and_query().unwrap().to_string(),
        authorization: header("authorization"),
        user_agent: header("user-agent"),
    });
    let script = scripts.lock().unwrap().get(req.uri().path()).cloned();
    let script = script.unwrap_or_else(|| Script::status(404));
    let mut reply = hyper::Response::builder().status(script.status);
    for (name, value) in &script.headers {
        reply = reply.header(name, value);
    }
    let body = match script.body {
        Body::Bytes(bytes) => Full::new(Bytes::from(bytes)).boxed_unsync(),
        Body::Endless => streamed(futures_util::stream::repeat(Bytes::from(vec![
            0u8;
            64 * 1024
        ]))),
        Body::Drip(every) => streamed(futures_util::stream::unfold((), move |()| async move {
            tokio::time::sleep(every).await;
            Some((Bytes::from_static(b"x"), ()))
        })),
        Body::Claims(len) => {
            reply = reply.header("content-length", len.to_string());
            streamed(
                futures_util::stream::once(async { Bytes::from(vec![0u8; 1024]) })
                    .chain(futures_util::stream::pending()),
            )
        }
    };
    reply.body(body).unwrap()
}

fn streamed(
    chunks: impl futures_util::Stream<Item = Bytes> + Send + 'static,
) -> UnsyncBoxBody<Bytes, Infallible> {
    StreamBody::new(chunks.map(|b| Ok(Frame::data(b)))).boxed_unsync()
}

/// The settings of the upstream `registry.example.test`, pinned to
/// `origin` by `connect.to` and trusting only the test CA.
pub fn settings(pki: &Pki, origin: &Origin) -> OriginSettings {
    settings_at(pki, origin.addr)
}

/// The same, pinned to `addr`.
pub fn settings_at(pki: &Pki, addr: SocketAddr) -> OriginSettings {
    let mut s = OriginSettings::new(UpstreamHost::parse(HOST).unwrap());
    s.connect = Some(Connect {
        to: BTreeMap::from([(HOST.to_string(), vec![addr])]),
        ca_pem: Some(pki.ca_pem.clone().into_bytes()),
        allow_nets: Vec::new(),
    });
    s.system_roots = false;
    s.timeouts = Timeouts {
        connect: Duration::from_secs(2),
        read: Duration::from_secs(3),
    };
    s
}

pub fn client(settings: OriginSettings, dns: &Arc<ScriptedLookup>) -> OriginClient {
    OriginClient::with_lookup(settings, dns.clone()).unwrap()
}

/// A deadline well beyond what a passing test needs.
pub fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

pub fn url(s: &str) -> url::Url {
    url::Url::parse(s).unwrap()
}

/// `path` on the upstream's own host.
pub fn at(path: &str) -> url::Url {
    url(&format!("https://{HOST}{path}"))
}

/// An origin, a trap on 127.0.0.1 (where nothing may ever connect), DNS
/// and a client.
pub struct Rig {
    pub origin: Origin,
    pub trap: Origin,
    pub dns: Arc<ScriptedLookup>,
    pub client: OriginClient,
}

impl Rig {
    pub async fn new() -> Self {
        Self::with(|_| {}).await
    }

    /// A rig whose settings `adjust` changes first.
    pub async fn with(adjust: impl FnOnce(&mut OriginSettings)) -> Self {
        let pki = Pki::new();
        let origin = Origin::start("127.0.0.50", &pki).await;
        let trap = Origin::start("127.0.0.1", &pki).await;
        let dns = Arc::new(ScriptedLookup::new());
        let mut s = settings(&pki, &origin);
        adjust(&mut s);
        let client = client(s, &dns);
        Self {
            origin,
            trap,
            dns,
            client,
        }
    }

    /// The discovery document: providers.v1 and modules.v1 on the origin.
    pub fn serve_discovery(&self) {
        self.origin.script(
            "/.well-known/terraform.json",
            Script::json(r#"{"providers.v1": "/v1/providers/", "modules.v1": "/v1/modules/"}"#),
        );
    }
}

/// `acme/p` 1.0.0's download answer for `linux_<arch>`.
pub async fn download_answer(
    rig: &Rig,
    services: &Services,
    arch: &str,
) -> Result<DownloadAnswer, OriginError> {
    let p = ProviderName::parse("acme", "p").unwrap();
    let v = Version::parse("1.0.0").unwrap();
    let platform = Platform::parse("linux", arch).unwrap();
    rig.client
        .provider_download(services, &p, &v, &platform, soon())
        .await
}
