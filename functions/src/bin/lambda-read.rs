//! The binary the read functions of template.yaml run (discovery, the version
//! lists and downloads, the mirror, blob): `TFREG_ENDPOINT` names the
//! endpoint. It has no publish or admin handlers, so the linker leaves out the
//! publishing code (OpenPGP, archive checks): a smaller zip and a faster cold
//! start. The publish and admin functions run `lambda`; the two binaries are
//! `sam build`'s two builds.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    tfreg::aws::lambda::run_configured_reads().await
}
