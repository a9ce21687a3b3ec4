//! The dashboard's HTTP/1.1, as small as a read-only local server can be: one request per
//! connection (`Connection: close`), GET and HEAD only, and a gate every request passes before
//! anything is read for it: its `Host` must name this server (a page of another site whose name
//! was rebound to this address is refused), and beyond loopback the URL must carry the token.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};

/// The most a request's line and headers may take: a browser's are a few hundred bytes.
const MAX_HEAD: usize = 16 * 1024;

/// A request's method, path (without the query) and query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    /// Every `Host` header given (HTTP/1.1 asks for exactly one).
    pub hosts: Vec<String>,
}

impl Request {
    /// The value of `key` in the query, percent-decoding nothing (tokens are hex).
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// Read a request's head from `stream`. `None` for anything that is not a well-formed HTTP/1.x
/// request line with headers within [`MAX_HEAD`] bytes.
pub fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.take(MAX_HEAD as u64));
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.trim_end_matches(['\r', '\n']).split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") || method.is_empty() {
        return None;
    }
    // Origin form only: an absolute URL (a proxy's request) names another server.
    if !target.starts_with('/') {
        return None;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut hosts = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        if name.eq_ignore_ascii_case("host") {
            hosts.push(value.trim().to_string());
        }
    }
    Some(Request { method: method.to_string(), path: path.to_string(), query: query.to_string(), hosts })
}

/// Who may be served: the address the server listens on and, beyond loopback, its token.
#[derive(Debug, Clone)]
pub struct Gate {
    pub addr: SocketAddr,
    /// Required as `?token=` on every request when set.
    pub token: Option<String>,
    /// This machine's host name: a browser on the network names the server by it.
    pub hostname: String,
}

/// Why a request is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a request this server understands (400).
    Malformed,
    /// Its `Host` names another server: DNS rebinding, or a proxy (421).
    ForeignHost,
    /// The token is missing or wrong (403).
    Token,
    /// Not GET or HEAD: nothing here changes anything (405).
    Method,
}

impl Gate {
    /// Whether `req` may be answered.
    pub fn check(&self, req: &Request) -> Result<(), Refusal> {
        let [host] = req.hosts.as_slice() else { return Err(Refusal::ForeignHost) };
        if !self.host_allowed(host) {
            return Err(Refusal::ForeignHost);
        }
        if let Some(token) = &self.token {
            if !req.param("token").is_some_and(|given| same(given.as_bytes(), token.as_bytes())) {
                return Err(Refusal::Token);
            }
        }
        if req.method != "GET" && req.method != "HEAD" {
            return Err(Refusal::Method);
        }
        Ok(())
    }

    /// A `Host` of this server: the bound address with its port; `localhost` on loopback; on
    /// an unspecified address (`0.0.0.0`, `::`), any address literal or this machine's name. A
    /// name an attacker controls never passes, so a rebound name cannot reach the server.
    fn host_allowed(&self, host: &str) -> bool {
        let port = self.addr.port();
        let Some((name, given_port)) = host.rsplit_once(':') else { return false };
        if given_port.parse::<u16>().ok() != Some(port) {
            return false;
        }
        let literal: Option<IpAddr> = name.trim_start_matches('[').trim_end_matches(']').parse().ok();
        let bound = self.addr.ip();
        if literal == Some(bound) {
            return true;
        }
        if bound.is_loopback() {
            return name.eq_ignore_ascii_case("localhost");
        }
        bound.is_unspecified() && (literal.is_some() || name.eq_ignore_ascii_case(&self.hostname))
    }
}

/// Compare without stopping at the first difference, so timing tells nothing of the token.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Headers every answer carries: nothing cached, nothing framed, no referrer (the URL may hold
/// the token), and scripts only from the page itself.
fn common_headers(out: &mut String) {
    out.push_str("Cache-Control: no-store\r\n");
    out.push_str("X-Content-Type-Options: nosniff\r\n");
    out.push_str("Referrer-Policy: no-referrer\r\n");
    out.push_str("X-Frame-Options: DENY\r\n");
    out.push_str("Connection: close\r\n");
}

/// Write a whole answer (the body left out for HEAD).
pub fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    head: bool,
) -> std::io::Result<()> {
    let mut h = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    h.push_str(&format!("Content-Type: {content_type}\r\nContent-Length: {}\r\n", body.len()));
    common_headers(&mut h);
    for (k, v) in extra {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    stream.write_all(h.as_bytes())?;
    if !head {
        stream.write_all(body)?;
    }
    stream.flush()
}

/// The head of a server-sent event stream (no length: it lasts until either side ends it).
pub fn start_events(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut h = String::from("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n");
    common_headers(&mut h);
    h.push_str("\r\n");
    stream.write_all(h.as_bytes())?;
    stream.flush()
}

/// The answer to a refused request.
pub fn refuse(stream: &mut TcpStream, why: Refusal) -> std::io::Result<()> {
    let (status, text, extra): (u16, &str, &[(&str, &str)]) = match why {
        Refusal::Malformed => (400, "bad request\n", &[]),
        Refusal::ForeignHost => (421, "this server answers only to the address it listens on\n", &[]),
        Refusal::Token => (403, "the dashboard's URL with its token is needed\n", &[]),
        Refusal::Method => (405, "read-only: GET and HEAD only\n", &[("Allow", "GET, HEAD")]),
    };
    respond(stream, status, "text/plain; charset=utf-8", extra, text.as_bytes(), false)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        421 => "Misdirected Request",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, query: &str, hosts: &[&str]) -> Request {
        Request {
            method: method.into(),
            path: "/".into(),
            query: query.into(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn gate(addr: &str, token: Option<&str>) -> Gate {
        Gate { addr: addr.parse().unwrap(), token: token.map(str::to_string), hostname: "box".into() }
    }

    #[test]
    fn loopback_answers_to_its_address_and_localhost_only() {
        let g = gate("127.0.0.1:8080", None);
        assert_eq!(g.check(&req("GET", "", &["127.0.0.1:8080"])), Ok(()));
        assert_eq!(g.check(&req("HEAD", "", &["LOCALHOST:8080"])), Ok(()));
        for host in ["evil.example:8080", "127.0.0.1:8081", "127.0.0.1", "box:8080", "127.0.0.2:8080"] {
            assert_eq!(g.check(&req("GET", "", &[host])), Err(Refusal::ForeignHost), "{host}");
        }
        assert_eq!(g.check(&req("GET", "", &[])), Err(Refusal::ForeignHost));
        assert_eq!(g.check(&req("GET", "", &["127.0.0.1:8080", "evil:8080"])), Err(Refusal::ForeignHost));
        assert_eq!(g.check(&req("POST", "", &["127.0.0.1:8080"])), Err(Refusal::Method));
        let v6 = gate("[::1]:9", None);
        assert_eq!(v6.check(&req("GET", "", &["[::1]:9"])), Ok(()));
    }

    #[test]
    fn beyond_loopback_the_token_is_needed() {
        let g = gate("0.0.0.0:80", Some("abc123"));
        assert_eq!(g.check(&req("GET", "token=abc123", &["10.0.0.5:80"])), Ok(()));
        assert_eq!(g.check(&req("GET", "x=1&token=abc123", &["box:80"])), Ok(()));
        assert_eq!(g.check(&req("GET", "", &["10.0.0.5:80"])), Err(Refusal::Token));
        assert_eq!(g.check(&req("GET", "token=abc124", &["10.0.0.5:80"])), Err(Refusal::Token));
        assert_eq!(g.check(&req("GET", "token=abc123", &["evil.example:80"])), Err(Refusal::ForeignHost));
    }

    #[test]
    fn requests_are_read_within_bounds() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        for (sent, parsed) in [
            ("GET /api/status?token=t HTTP/1.1\r\nHost: a:1\r\nX: y\r\n\r\n", true),
            ("GET http://a/ HTTP/1.1\r\nHost: a:1\r\n\r\n", false),
            ("GET / SPDY/3\r\n\r\n", false),
            ("GET / HTTP/1.1\r\nHost: a:1\r\n", false),
        ] {
            let mut client = TcpStream::connect(addr).unwrap();
            client.write_all(sent.as_bytes()).unwrap();
            client.shutdown(std::net::Shutdown::Write).unwrap();
            let (server, _) = listener.accept().unwrap();
            let got = read_request(&server);
            assert_eq!(got.is_some(), parsed, "{sent:?}");
            if let Some(r) = got {
                assert_eq!(
                    (r.path.as_str(), r.param("token"), r.hosts.clone()),
                    ("/api/status", Some("t"), vec!["a:1".into()])
                );
            }
        }
    }
}
