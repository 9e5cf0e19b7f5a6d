//! The [`Router`]: ordered rules over the sniffers, a byte budget and a
//! deadline, in the manner of HAProxy's `tcp-request inspect-delay`; and
//! the [`FrameRouter`] for routing each frame of a framed stream.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;

use crate::error::Error;
use crate::sniff::http::RequestHead;
use crate::sniff::tls::ClientHello;
use crate::sniff::{http, prefix, tls, Sniff};

/// Default [`RouterConfig::budget`]: the most bytes a ClientHello can take
/// ([`tls::DEFAULT_MAX_HELLO`]); an HTTP head must fit in less.
pub const DEFAULT_BUDGET: usize = tls::DEFAULT_MAX_HELLO;

/// Default [`RouterConfig::inspect_delay`]: 5 s, the value HAProxy's
/// documentation uses for `tcp-request inspect-delay`: longer than any
/// client takes to send its first flight, short enough to drop silent ones.
pub const DEFAULT_INSPECT_DELAY: Duration = Duration::from_secs(5);

/// A host name to compare with an SNI or a Host header: exact
/// (`example.com`) or a wildcard for any subdomain (`*.example.com`, which
/// does not match `example.com` itself). Compared without case and
/// without a trailing dot, so `EXAMPLE.com.` matches `example.com`; the
/// bytes the client sent are not rewritten, so the backend sees them as
/// sent and must treat them as the same name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPattern {
    name: String,
    wildcard: bool,
}

impl HostPattern {
    /// Parses `pattern`; a leading `*.` makes it a wildcard, and a
    /// trailing dot is dropped (`example.com.` is `example.com`).
    #[must_use]
    pub fn new(pattern: &str) -> Self {
        let lower = pattern
            .strip_suffix('.')
            .unwrap_or(pattern)
            .to_ascii_lowercase();
        match lower.strip_prefix("*.") {
            Some(suffix) => Self {
                name: String::from(suffix),
                wildcard: true,
            },
            None => Self {
                name: lower,
                wildcard: false,
            },
        }
    }

    /// Whether `host` (any case, a trailing dot allowed) matches.
    #[must_use]
    pub fn matches(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host);
        if !self.wildcard {
            return host.eq_ignore_ascii_case(&self.name);
        }
        let (n, h) = (self.name.len(), host.len());
        h > n + 1
            && host.as_bytes()[h - n - 1] == b'.'
            && host[h - n..].eq_ignore_ascii_case(&self.name)
    }
}

/// What a rule looks for in the first bytes of a connection.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// A TLS ClientHello whose server name matches.
    TlsServerName(HostPattern),
    /// A TLS ClientHello offering this ALPN protocol.
    TlsAlpn(Bytes),
    /// Any TLS ClientHello.
    Tls,
    /// An HTTP/1.x request whose Host (port left out) matches: the
    /// connection's first request, as for every rule.
    HttpHost(HostPattern),
    /// An HTTP/1.x request asking to upgrade; to this protocol (compared
    /// without case), if one is given.
    HttpUpgrade(Option<String>),
    /// Any HTTP/1.x request.
    Http,
    /// A literal prefix (`SSH-`, a protocol's magic bytes), left in the
    /// stream for the target.
    Prefix(Bytes),
    /// A literal prefix that only says where to go: the decision consumes
    /// it (a multiplexer's tag before the real protocol).
    PrefixConsumed(Bytes),
}

/// Limits of a [`Router`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterConfig {
    budget: usize,
    inspect_delay: Duration,
    max_head: usize,
    max_headers: usize,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            budget: DEFAULT_BUDGET,
            inspect_delay: DEFAULT_INSPECT_DELAY,
            max_head: http::DEFAULT_MAX_HEAD,
            max_headers: http::DEFAULT_MAX_HEADERS,
        }
    }
}

impl RouterConfig {
    /// The most bytes the router reads before it decides; what a rule has
    /// not seen by then, it does not match. Bytes past the budget are never
    /// looked at, so the decision does not depend on how the bytes arrived.
    /// Default [`DEFAULT_BUDGET`].
    #[must_use]
    pub fn budget(mut self, bytes: usize) -> Self {
        self.budget = bytes;
        self
    }

    /// How long after the connection began the router waits for a rule to
    /// become decidable; then it decides with what it has. Default
    /// [`DEFAULT_INSPECT_DELAY`].
    #[must_use]
    pub fn inspect_delay(mut self, delay: Duration) -> Self {
        self.inspect_delay = delay;
        self
    }

    /// Limits of the HTTP head sniffer (bytes, headers). Default
    /// [`http::DEFAULT_MAX_HEAD`], [`http::DEFAULT_MAX_HEADERS`].
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) when
    /// `max_head` is 0, or `max_headers` is 0 or more than
    /// [`http::MAX_HEADERS`] (the sniffer's table lives on the stack).
    pub fn http_limits(mut self, max_head: usize, max_headers: usize) -> Result<Self, Error> {
        http::check_limits(max_head, max_headers)?;
        self.max_head = max_head;
        self.max_headers = max_headers;
        Ok(self)
    }

    /// See [`budget`](Self::budget).
    #[must_use]
    pub fn get_budget(&self) -> usize {
        self.budget
    }

    /// See [`http_limits`](Self::http_limits): (bytes, headers).
    #[must_use]
    pub fn get_http_limits(&self) -> (usize, usize) {
        (self.max_head, self.max_headers)
    }

    /// See [`inspect_delay`](Self::inspect_delay).
    #[must_use]
    pub fn get_inspect_delay(&self) -> Duration {
        self.inspect_delay
    }
}

/// What the router learned about the connection.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Facts {
    /// Nothing recognised.
    None,
    /// A TLS ClientHello.
    Tls(ClientHello),
    /// An HTTP/1.x request head.
    Http(RequestHead),
    /// A literal prefix (of the rule that matched).
    Prefix,
}

/// Why the router decided.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A rule matched.
    Matched,
    /// Every rule was decided and none matched: the fallback.
    NoRuleMatched,
    /// The byte budget was spent with rules still undecided: the fallback.
    BudgetSpent,
    /// The inspect delay passed with rules still undecided: the fallback.
    DeadlinePassed,
    /// The stream ended with rules still undecided: the fallback.
    EndOfStream,
}

/// A routing decision.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision<T> {
    /// Where to send the connection.
    pub target: T,
    /// The index of the rule that matched, if one did.
    pub rule: Option<usize>,
    /// Why.
    pub reason: Reason,
    /// What was learned (also on a fallback, if a sniffer recognised
    /// something).
    pub facts: Facts,
    /// The malformed input a sniffer met, if any (such a rule does not
    /// match, as a broken ClientHello does not match HAProxy's
    /// `req.ssl_sni`). A stream is either a ClientHello or an HTTP head,
    /// so at most one sniffer has something to say; were both to, this is
    /// the TLS sniffer's.
    pub malformed: Option<Error>,
    /// Bytes to take off the front of the stream before it goes to the
    /// target: the prefix of a [`Match::PrefixConsumed`] rule, else 0. A
    /// [`Session`](crate::Session) does this itself.
    pub consume: usize,
}

/// What one connection's routing remembers between looks at its first
/// bytes, so that each look costs only the bytes that arrived since the
/// last: the sniffers' progress and answers, and the rules already ruled
/// out. Give [`Router::route_with`] the same one on every call for a
/// connection, with the connection's first bytes so far.
#[derive(Clone, Debug, Default)]
pub struct RouteState {
    tls: tls::Sniffer,
    http: http::Sniffer,
    /// Rules (the first 64) whose answer is a final "no".
    ruled_out: u64,
    /// Prefix bytes compared.
    compared: u64,
}

impl RouteState {
    /// A state for a connection that has sent nothing yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes the sniffers have looked at so far, over every look: a
    /// measure of the routing's work, linear in the bytes received
    /// whatever their pieces.
    pub fn examined(&self) -> u64 {
        self.compared + self.tls.examined() + self.http.examined()
    }

    /// What a sniffer met that was malformed; a stream is either a
    /// ClientHello or an HTTP head, so at most one has something to say.
    fn malformed(&self) -> Option<Error> {
        match (self.tls.answer(), self.http.answer()) {
            (Sniff::Invalid(e), _) | (_, Sniff::Invalid(e)) => Some(e.clone()),
            _ => None,
        }
    }
}

enum Verdict {
    Yes(Facts),
    No,
    Wait,
}

/// Ordered rules over the sniffers, with a fallback.
///
/// The decision is for the connection, made on its first bytes: with HTTP,
/// on the first request's head only. A keep-alive client may send later
/// requests on the same connection for other hosts; they go where the
/// first one went, unseen by the router (see
/// [`RequestHead::host`]).
///
/// The router looks at the first bytes (never more than its budget) and
/// goes through the rules in order: a rule that matches decides; a rule
/// that does not, passes; a rule that cannot tell yet makes the router wait
/// for more bytes, until the budget is spent, the inspect delay has passed
/// or the stream ended, when such rules count as not matching. The clock is
/// the caller's: `elapsed` is the time since the connection began.
///
/// ```
/// use cleave_proto::route::{HostPattern, Match, Reason, Router};
/// use core::time::Duration;
///
/// let router = Router::new("default")
///     .rule(Match::TlsServerName(HostPattern::new("*.example.com")), "tls-backend")
///     .rule(Match::HttpHost(HostPattern::new("example.com")), "web")
///     .rule(Match::Prefix("SSH-".into()), "ssh");
///
/// let decision = router.route(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", Duration::ZERO);
/// assert_eq!(decision.map(|d| d.target), Some("web"));
/// assert_eq!(router.route(b"GET / HT", Duration::ZERO), None); // need more
/// let late = router.route(b"GET / HT", Duration::from_secs(6)).unwrap();
/// assert_eq!((late.target, late.reason), ("default", Reason::DeadlinePassed));
/// ```
///
/// Cloning a router is cheap (its rules are shared), so a server can give
/// every connection's session its own.
#[derive(Clone, Debug)]
pub struct Router<T> {
    rules: Arc<Vec<(Match, T)>>,
    fallback: T,
    config: RouterConfig,
}

impl<T: Clone> Router<T> {
    /// A router with no rules, sending everything to `fallback`.
    pub fn new(fallback: T) -> Self {
        Self::with_config(fallback, RouterConfig::default())
    }

    /// A router with the given limits.
    pub fn with_config(fallback: T, config: RouterConfig) -> Self {
        Self {
            rules: Arc::new(Vec::new()),
            fallback,
            config,
        }
    }

    /// Adds a rule after the others.
    #[must_use]
    pub fn rule(mut self, when: Match, target: T) -> Self {
        Arc::make_mut(&mut self.rules).push((when, target));
        self
    }

    /// The configuration.
    pub fn config(&self) -> &RouterConfig {
        &self.config
    }

    /// Decides for the connection whose first bytes are `data`, `elapsed`
    /// after it began; `None` means "wait for more bytes (or for the
    /// deadline)".
    ///
    /// Each call looks at `data` from its start: for a connection whose
    /// bytes arrive in pieces, [`route_with`](Self::route_with) gives the
    /// same answers and looks at each byte once.
    #[must_use]
    pub fn route(&self, data: &[u8], elapsed: Duration) -> Option<Decision<T>> {
        self.route_with(&mut RouteState::new(), data, elapsed)
    }

    /// As [`route`](Self::route), resuming from what `state` remembers of
    /// the earlier calls for this connection, so that sniffing costs work
    /// linear in the bytes received however they are cut: a ClientHello
    /// in one-byte records or a head trickled a byte at a time is not
    /// parsed again from its start at every call.
    ///
    /// `data` must be the connection's first bytes so far: each call's
    /// extends the last one's. The answers are those of `route` on the
    /// same bytes.
    ///
    /// ```
    /// use cleave_proto::route::{HostPattern, Match, RouteState, Router};
    /// use core::time::Duration;
    ///
    /// let router = Router::new("default").rule(Match::HttpHost(HostPattern::new("example.com")), "web");
    /// let head = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
    /// let mut state = RouteState::new();
    /// let mut decision = None;
    /// for end in 1..=head.len() {
    ///     decision = router.route_with(&mut state, &head[..end], Duration::ZERO);
    ///     assert_eq!(decision.is_some(), end == head.len());
    /// }
    /// assert_eq!(decision.map(|d| d.target), Some("web"));
    /// assert!(state.examined() < 5 * head.len() as u64);
    /// ```
    #[must_use]
    pub fn route_with(
        &self,
        state: &mut RouteState,
        data: &[u8],
        elapsed: Duration,
    ) -> Option<Decision<T>> {
        let forced = if data.len() >= self.config.budget {
            Some(Reason::BudgetSpent)
        } else if elapsed >= self.config.inspect_delay {
            Some(Reason::DeadlinePassed)
        } else {
            None
        };
        self.decide(state, data, forced)
    }

    /// Where one HTTP request goes, judged by its own head: the first rule
    /// that an HTTP request can match ([`Match::HttpHost`] against its
    /// Host without the port, [`Match::HttpUpgrade`], [`Match::Http`])
    /// and does, or the fallback; the index of that rule. TLS and prefix
    /// rules say nothing about a request and are passed over. For a
    /// keep-alive connection that must route each request by its own Host
    /// (see [`http1::Routed`](crate::http1::Routed)), not by the first.
    ///
    /// ```
    /// use cleave_proto::route::{HostPattern, Match, Router};
    /// use cleave_proto::http1::{Server, ServerEvent};
    /// use cleave_proto::Conn;
    /// use std::time::Duration;
    ///
    /// let router = Router::new("default").rule(Match::HttpHost(HostPattern::new("*.example.com")), "example");
    /// let mut conn = Conn::new(Server::new(), Duration::ZERO);
    /// conn.feed(b"GET / HTTP/1.1\r\nHost: www.example.com:8080\r\n\r\n", Duration::ZERO)?;
    /// let Some(ServerEvent::Head(request)) = conn.poll_event()? else { panic!() };
    /// assert_eq!(router.route_request(&request), (&"example", Some(0)));
    /// # Ok::<(), cleave_proto::Error>(())
    /// ```
    #[must_use]
    pub fn route_request(&self, request: &crate::http1::Request) -> (&T, Option<usize>) {
        // The name without the port (patterns compare without case: no
        // copy).
        let name = request.host().map(|host| match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(v6),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        });
        for (i, (when, target)) in self.rules.iter().enumerate() {
            let matched = match when {
                Match::Http => true,
                Match::HttpHost(pattern) => name.is_some_and(|n| pattern.matches(n)),
                Match::HttpUpgrade(protocol) => {
                    request.is_upgrade()
                        && protocol.as_deref().is_none_or(|p| {
                            request
                                .upgrade()
                                .is_some_and(|u| u.eq_ignore_ascii_case(p.as_bytes()))
                        })
                }
                _ => false,
            };
            if matched {
                return (target, Some(i));
            }
        }
        (&self.fallback, None)
    }

    /// Decides for a connection whose stream ended after `data`: rules that
    /// cannot tell count as not matching.
    #[must_use]
    pub fn route_at_end(&self, data: &[u8]) -> Decision<T> {
        self.route_at_end_with(&mut RouteState::new(), data)
    }

    /// As [`route_at_end`](Self::route_at_end), resuming from `state` (see
    /// [`route_with`](Self::route_with)).
    #[must_use]
    pub fn route_at_end_with(&self, state: &mut RouteState, data: &[u8]) -> Decision<T> {
        let forced = if data.len() >= self.config.budget {
            Reason::BudgetSpent
        } else {
            Reason::EndOfStream
        };
        match self.decide(state, data, Some(forced)) {
            Some(decision) => decision,
            None => self.fallback(Reason::EndOfStream, state),
        }
    }

    fn decide(
        &self,
        state: &mut RouteState,
        data: &[u8],
        forced: Option<Reason>,
    ) -> Option<Decision<T>> {
        let window = &data[..data.len().min(self.config.budget)];
        let mut waited = false;
        for (i, (when, target)) in self.rules.iter().enumerate() {
            let bit = u32::try_from(i).map_or(0, |i| 1u64.checked_shl(i).unwrap_or(0));
            if state.ruled_out & bit != 0 {
                continue;
            }
            match self.verdict(when, window, state) {
                Verdict::Yes(facts) => {
                    let consume = match when {
                        Match::PrefixConsumed(prefix) => prefix.len(),
                        _ => 0,
                    };
                    return Some(Decision {
                        target: target.clone(),
                        rule: Some(i),
                        reason: Reason::Matched,
                        facts,
                        malformed: state.malformed(),
                        consume,
                    });
                }
                // A sniffer's "no" is final: the rule is not asked again.
                Verdict::No => state.ruled_out |= bit,
                Verdict::Wait if forced.is_some() => waited = true,
                Verdict::Wait => return None,
            }
        }
        let reason = match forced {
            Some(reason) if waited => reason,
            _ => Reason::NoRuleMatched,
        };
        Some(self.fallback(reason, state))
    }

    fn fallback(&self, reason: Reason, state: &RouteState) -> Decision<T> {
        let facts = match (state.tls.answer(), state.http.answer()) {
            (Sniff::Match { facts, .. }, _) => Facts::Tls(facts.clone()),
            (_, Sniff::Match { facts, .. }) => Facts::Http(facts.clone()),
            _ => Facts::None,
        };
        Decision {
            target: self.fallback.clone(),
            rule: None,
            reason,
            facts,
            malformed: state.malformed(),
            consume: 0,
        }
    }

    fn verdict(&self, when: &Match, window: &[u8], state: &mut RouteState) -> Verdict {
        let config = &self.config;
        match when {
            Match::Tls | Match::TlsServerName(_) | Match::TlsAlpn(_) => {
                let answer = state.tls.sniff(window, config.budget);
                verdict_of(answer, |hello| match when {
                    Match::TlsServerName(pattern) => hello
                        .server_name
                        .as_deref()
                        .is_some_and(|name| pattern.matches(name)),
                    Match::TlsAlpn(protocol) => hello.offers_alpn(protocol),
                    _ => true,
                })
                .map_yes(|| answer_facts(answer, Facts::Tls))
            }
            Match::Http | Match::HttpHost(_) | Match::HttpUpgrade(_) => {
                let answer = state
                    .http
                    .sniff(window, config.max_head, config.max_headers);
                verdict_of(answer, |head| match when {
                    Match::HttpHost(pattern) => {
                        head.host_name().is_some_and(|name| pattern.matches(&name))
                    }
                    Match::HttpUpgrade(protocol) => {
                        head.is_upgrade()
                            && protocol.as_deref().is_none_or(|p| {
                                head.upgrade().is_some_and(|u| u.eq_ignore_ascii_case(p))
                            })
                    }
                    _ => true,
                })
                .map_yes(|| answer_facts(answer, Facts::Http))
            }
            Match::Prefix(bytes) | Match::PrefixConsumed(bytes) => {
                state.compared += window.len().min(bytes.len()) as u64;
                match prefix::sniff(window, bytes) {
                    Sniff::Match { .. } => Verdict::Yes(Facts::Prefix),
                    Sniff::NeedMore => Verdict::Wait,
                    _ => Verdict::No,
                }
            }
        }
    }
}

/// A rule's verdict from a sniffer's answer and the rule's own test.
fn verdict_of<F>(answer: &Sniff<F>, test: impl Fn(&F) -> bool) -> Verdict {
    match answer {
        Sniff::NeedMore => Verdict::Wait,
        Sniff::Match { facts, .. } if test(facts) => Verdict::Yes(Facts::None),
        _ => Verdict::No,
    }
}

fn answer_facts<F: Clone>(answer: &Sniff<F>, wrap: impl Fn(F) -> Facts) -> Facts {
    answer.facts().cloned().map_or(Facts::None, wrap)
}

impl Verdict {
    /// Fills in the facts of a "yes" lazily.
    fn map_yes(self, facts: impl FnOnce() -> Facts) -> Self {
        match self {
            Self::Yes(_) => Self::Yes(facts()),
            other => other,
        }
    }
}

/// Routes each frame of a framed stream by its content: ordered prefix
/// rules and a fallback. The route-frames-then-tunnel workload: frames say
/// where they go.
///
/// ```
/// use cleave_proto::route::FrameRouter;
///
/// let router = FrameRouter::new("unknown").prefix("ROUTE a ", "shard-a").prefix("ROUTE b ", "shard-b");
/// assert_eq!(router.route(b"ROUTE b key=1"), &"shard-b");
/// assert_eq!(router.route(b"PING"), &"unknown");
/// ```
#[derive(Clone, Debug)]
pub struct FrameRouter<T> {
    rules: Vec<(Bytes, T)>,
    fallback: T,
}

impl<T> FrameRouter<T> {
    /// A router with no rules.
    pub fn new(fallback: T) -> Self {
        Self {
            rules: Vec::new(),
            fallback,
        }
    }

    /// Frames that start with `prefix` go to `target` (first rule wins).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<Bytes>, target: T) -> Self {
        self.rules.push((prefix.into(), target));
        self
    }

    /// Where `frame` goes.
    #[must_use]
    pub fn route(&self, frame: &[u8]) -> &T {
        self.rules
            .iter()
            .find(|(prefix, _)| frame.starts_with(prefix))
            .map_or(&self.fallback, |(_, target)| target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        let exact = HostPattern::new("Example.COM");
        assert!(exact.matches("example.com") && exact.matches("EXAMPLE.com."));
        assert!(!exact.matches("www.example.com"));
        let wild = HostPattern::new("*.example.com");
        assert!(wild.matches("a.example.com") && wild.matches("a.b.Example.com"));
        assert!(!wild.matches("example.com") && !wild.matches("badexample.com"));
    }
}
