//! A hand-written SVG: item bytes read per versions list against the
//! number of versions, both axes logarithmic, one line per layout and list.

use super::Read;

const W: f64 = 640.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const BOTTOM: f64 = 50.0;
const TOP: f64 = 30.0;
const RIGHT: f64 = 180.0;

fn log_scale(v: f64, lo: f64, hi: f64, from: f64, to: f64) -> f64 {
    let t = (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln());
    from + t * (to - from)
}

pub fn svg(reads: &[Read]) -> String {
    let embedded: Vec<&Read> = reads
        .iter()
        .filter(|r| r.backend == "embedded" && r.bytes_read > 0)
        .collect();
    let (x_lo, x_hi) = (10.0, 5000.0);
    let y_lo = 1024.0f64;
    let y_hi = embedded
        .iter()
        .map(|r| r.bytes_read as f64)
        .fold(y_lo * 10.0, f64::max)
        * 1.5;
    let x = |v: f64| log_scale(v, x_lo, x_hi, LEFT, W - RIGHT);
    let y = |v: f64| log_scale(v, y_lo, y_hi, H - BOTTOM, TOP);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"18\" font-size=\"14\">Item bytes read per versions list (log–log)</text>\n"
    );
    // Axes and ticks.
    svg.push_str(&format!(
        "<line x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{}\" stroke=\"black\"/>\n",
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM,
        H - BOTTOM
    ));
    for v in [10.0, 100.0, 1000.0, 5000.0] {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{v}</text>\n",
            x(v),
            H - BOTTOM + 18.0
        ));
    }
    svg.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">versions</text>\n",
        (LEFT + W - RIGHT) / 2.0,
        H - 10.0
    ));
    let mut tick = y_lo;
    while tick <= y_hi {
        let label = if tick >= 1024.0 * 1024.0 {
            format!("{} MB", tick / 1024.0 / 1024.0)
        } else {
            format!("{} KB", tick / 1024.0)
        };
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>\n<line x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\n",
            LEFT - 6.0,
            y(tick) + 4.0,
            y(tick),
            W - RIGHT,
            y(tick)
        ));
        tick *= 10.0;
    }
    let lines = [
        ("provider", "query", "#d62728", "provider, query (before)"),
        ("provider", "index", "#2ca02c", "provider, index"),
        ("module", "query", "#ff7f0e", "module, query (before)"),
        ("module", "index", "#1f77b4", "module, index"),
    ];
    for (i, (subject, layout, colour, label)) in lines.iter().enumerate() {
        let points: Vec<String> = embedded
            .iter()
            .filter(|r| r.subject == *subject && r.layout == *layout)
            .map(|r| format!("{:.1},{:.1}", x(r.versions as f64), y(r.bytes_read as f64)))
            .collect();
        svg.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>\n",
            points.join(" ")
        ));
        let ly = TOP + 20.0 + 20.0 * i as f64;
        svg.push_str(&format!(
            "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n<text x=\"{}\" y=\"{}\">{label}</text>\n",
            W - RIGHT + 10.0,
            W - RIGHT + 30.0,
            W - RIGHT + 35.0,
            ly + 4.0
        ));
    }
    svg.push_str("</svg>\n");
    svg
}
