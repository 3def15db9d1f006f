//! CloudWatch metric math, the part of it an alarm's `Metrics` uses, evaluated period by period
//! (moto keeps an alarm's metric queries but answers no expression).
//!
//! An expression reads the series of the alarm's other queries by id, each a value or nothing
//! per evaluation period. As in CloudWatch: arithmetic (`+ - * /`), comparisons (`> >= < <= ==
//! !=`, 1 or 0), `AND`/`&&`, `OR`/`||`, `NOT`/`!`, `IF(condition, then[, else])` (no value where
//! the condition holds none, or is false without an else) and `FILL(series, value)`. An operation
//! on a missing value gives no value, so a period left empty stays missing unless it is filled.

use std::collections::BTreeMap;

/// An expression CloudWatch would refuse, or that this evaluator does not know.
#[derive(Debug, thiserror::Error)]
#[error("metric math {expression:?}: {message}")]
pub struct MathError {
    /// The expression, as written.
    pub expression: String,
    /// What is wrong, and where.
    pub message: String,
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `AND`, `&&`
    And,
    /// `OR`, `||`
    Or,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A constant.
    Number(f64),
    /// Another query's series, by id.
    Series(String),
    /// `-x`.
    Neg(Box<Expr>),
    /// `NOT x`.
    Not(Box<Expr>),
    /// `a op b`.
    Binary(Op, Box<Expr>, Box<Expr>),
    /// `IF(condition, then[, else])`.
    If(Box<Expr>, Box<Expr>, Option<Box<Expr>>),
    /// `FILL(series, value)`.
    Fill(Box<Expr>, Box<Expr>),
}

/// Each query's series by id: a value or nothing for each evaluation period, oldest first.
pub type Series = BTreeMap<String, Vec<Option<f64>>>;

impl Expr {
    /// The expression's value in period `i` of `series`.
    pub(crate) fn at(&self, series: &Series, i: usize) -> Option<f64> {
        let truth = |b: bool| if b { 1.0 } else { 0.0 };
        match self {
            Expr::Number(n) => Some(*n),
            Expr::Series(id) => series.get(id).and_then(|s| s.get(i).copied().flatten()),
            Expr::Neg(x) => x.at(series, i).map(|v| -v),
            Expr::Not(x) => x.at(series, i).map(|v| truth(v == 0.0)),
            Expr::Binary(op, a, b) => {
                let (a, b) = (a.at(series, i)?, b.at(series, i)?);
                Some(match op {
                    Op::Add => a + b,
                    Op::Sub => a - b,
                    Op::Mul => a * b,
                    Op::Div => a / b,
                    Op::Gt => truth(a > b),
                    Op::Ge => truth(a >= b),
                    Op::Lt => truth(a < b),
                    Op::Le => truth(a <= b),
                    Op::Eq => truth((a - b).abs() < f64::EPSILON),
                    Op::Ne => truth((a - b).abs() >= f64::EPSILON),
                    Op::And => truth(a != 0.0 && b != 0.0),
                    Op::Or => truth(a != 0.0 || b != 0.0),
                })
            }
            Expr::If(condition, then, otherwise) => {
                if condition.at(series, i)? == 0.0 {
                    otherwise.as_ref()?.at(series, i)
                } else {
                    then.at(series, i)
                }
            }
            Expr::Fill(x, value) => x.at(series, i).or_else(|| value.at(series, i)),
        }
    }

    /// The ids of the series the expression reads.
    pub(crate) fn ids(&self) -> Vec<&str> {
        let mut ids = Vec::new();
        self.collect_ids(&mut ids);
        ids
    }

    fn collect_ids<'e>(&'e self, ids: &mut Vec<&'e str>) {
        match self {
            Expr::Number(_) => {}
            Expr::Series(id) => ids.push(id),
            Expr::Neg(x) | Expr::Not(x) => x.collect_ids(ids),
            Expr::Binary(_, a, b) | Expr::Fill(a, b) => {
                a.collect_ids(ids);
                b.collect_ids(ids);
            }
            Expr::If(c, t, e) => {
                c.collect_ids(ids);
                t.collect_ids(ids);
                if let Some(e) = e {
                    e.collect_ids(ids);
                }
            }
        }
    }
}

/// A token of an expression.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(f64),
    Word(String),
    Symbol(&'static str),
}

const SYMBOLS: [&str; 16] =
    [">=", "<=", "==", "!=", "&&", "||", ">", "<", "+", "-", "*", "/", "(", ")", ",", "!"];

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let c = rest.chars().next().unwrap_or(' ');
        if let Some(symbol) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) {
            out.push(Token::Symbol(symbol));
            rest = &rest[symbol.len()..];
        } else if c.is_ascii_digit() || c == '.' {
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
            let number = rest[..end].parse().map_err(|_| format!("{:?} is not a number", &rest[..end]))?;
            out.push(Token::Number(number));
            rest = &rest[end..];
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            out.push(Token::Word(rest[..end].to_owned()));
            rest = &rest[end..];
        } else {
            return Err(format!("unexpected {c:?}"));
        }
        rest = rest.trim_start();
    }
    Ok(out)
}

/// Parses `expression`.
pub fn parse(expression: &str) -> Result<Expr, MathError> {
    let error = |message: String| MathError { expression: expression.to_owned(), message };
    let mut parser = Parser { tokens: tokens(expression).map_err(error)?, at: 0 };
    let expr = parser.or().map_err(error)?;
    match parser.tokens.get(parser.at) {
        None => Ok(expr),
        Some(extra) => Err(error(format!("{extra:?} after the expression"))),
    }
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn take(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    /// Takes the next token if it is one of `symbols` or the word `word`.
    fn eat(&mut self, symbols: &[&str], word: Option<&str>) -> Option<String> {
        let found = match self.peek() {
            Some(Token::Symbol(s)) if symbols.contains(s) => (*s).to_owned(),
            Some(Token::Word(w)) if word.is_some_and(|word| w.eq_ignore_ascii_case(word)) => w.to_uppercase(),
            _ => return None,
        };
        self.at += 1;
        Some(found)
    }

    fn expect(&mut self, symbol: &str) -> Result<(), String> {
        match self.take() {
            Some(Token::Symbol(s)) if s == symbol => Ok(()),
            other => Err(format!("expected {symbol:?}, found {other:?}")),
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.eat(&["||"], Some("OR")).is_some() {
            left = Expr::Binary(Op::Or, Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.comparison()?;
        while self.eat(&["&&"], Some("AND")).is_some() {
            left = Expr::Binary(Op::And, Box::new(left), Box::new(self.comparison()?));
        }
        Ok(left)
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        let left = self.sum()?;
        let op = match self.eat(&[">=", "<=", "==", "!=", ">", "<"], None).as_deref() {
            Some(">=") => Op::Ge,
            Some("<=") => Op::Le,
            Some("==") => Op::Eq,
            Some("!=") => Op::Ne,
            Some(">") => Op::Gt,
            Some("<") => Op::Lt,
            _ => return Ok(left),
        };
        Ok(Expr::Binary(op, Box::new(left), Box::new(self.sum()?)))
    }

    fn sum(&mut self) -> Result<Expr, String> {
        self.left_associative([("+", Op::Add), ("-", Op::Sub)], Parser::product)
    }

    fn product(&mut self) -> Result<Expr, String> {
        self.left_associative([("*", Op::Mul), ("/", Op::Div)], Parser::unary)
    }

    /// Operands read by `operand`, joined from the left by the two operators of one precedence.
    fn left_associative(
        &mut self,
        ops: [(&str, Op); 2],
        operand: fn(&mut Self) -> Result<Expr, String>,
    ) -> Result<Expr, String> {
        let mut left = operand(self)?;
        while let Some(symbol) = self.eat(&[ops[0].0, ops[1].0], None) {
            let op = if symbol == ops[0].0 { ops[0].1 } else { ops[1].1 };
            left = Expr::Binary(op, Box::new(left), Box::new(operand(self)?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat(&["-"], None).is_some() {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        if self.eat(&["!"], Some("NOT")).is_some() {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.take() {
            Some(Token::Number(n)) => Ok(Expr::Number(n)),
            Some(Token::Symbol("(")) => {
                let inner = self.or()?;
                self.expect(")")?;
                Ok(inner)
            }
            Some(Token::Word(word)) if self.peek() == Some(&Token::Symbol("(")) => {
                self.at += 1;
                let mut args = vec![self.or()?];
                while self.eat(&[","], None).is_some() {
                    args.push(self.or()?);
                }
                self.expect(")")?;
                call(&word, args)
            }
            Some(Token::Word(id)) => Ok(Expr::Series(id)),
            other => Err(format!("expected a value, found {other:?}")),
        }
    }
}

fn call(function: &str, args: Vec<Expr>) -> Result<Expr, String> {
    let n = args.len();
    let mut args = args.into_iter().map(Box::new);
    let mut next = || args.next();
    match (function.to_uppercase().as_str(), n) {
        ("IF", 2 | 3) => {
            let (c, t) = (next(), next());
            Ok(Expr::If(c.unwrap_or_default(), t.unwrap_or_default(), next()))
        }
        ("FILL", 2) => Ok(Expr::Fill(next().unwrap_or_default(), next().unwrap_or_default())),
        (name, n) => Err(format!("{name} with {n} arguments is not evaluated here")),
    }
}

impl Default for Expr {
    fn default() -> Self {
        Expr::Number(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(pairs: &[(&str, &[Option<f64>])]) -> Series {
        pairs.iter().map(|(id, s)| ((*id).to_owned(), s.to_vec())).collect()
    }

    const STOPPED: &str = "IF(FILL(writes, 0) > 0 AND FILL(polled, 0) == 0, 1, 0)";

    #[test]
    fn expressions_evaluate_period_by_period() {
        let data = series(&[
            ("writes", &[Some(3.0), Some(3.0), None, Some(2.0), None]),
            ("polled", &[None, Some(3.0), None, Some(0.0), Some(1.0)]),
        ]);
        let cases: &[(&str, [Option<f64>; 5])] = &[
            (STOPPED, [Some(1.0), Some(0.0), Some(0.0), Some(1.0), Some(0.0)]),
            ("writes + polled", [None, Some(6.0), None, Some(2.0), None]),
            ("FILL(writes, 0) - 2 * 2", [Some(-1.0), Some(-1.0), Some(-4.0), Some(-2.0), Some(-4.0)]),
            ("IF(writes > 2, writes)", [Some(3.0), Some(3.0), None, None, None]),
            ("NOT (polled >= 1) || writes < 0", [None, Some(0.0), None, Some(1.0), None]),
            ("-(writes / 2)", [Some(-1.5), Some(-1.5), None, Some(-1.0), None]),
            ("!polled && 1 != 2", [None, Some(0.0), None, Some(1.0), Some(0.0)]),
        ];
        for (text, expected) in cases {
            let expr = parse(text).unwrap_or_else(|e| panic!("{e}"));
            let got: Vec<Option<f64>> = (0..5).map(|i| expr.at(&data, i)).collect();
            assert_eq!(got, expected, "{text}");
        }
    }

    #[test]
    fn precedence_is_cloudwatchs() {
        assert_eq!(
            parse("1 + 2 * 3 > 6 AND 0 OR 1").unwrap(),
            parse("(((1 + (2 * 3)) > 6) AND 0) OR 1").unwrap()
        );
        assert_eq!(parse(STOPPED).unwrap().ids(), ["writes", "polled"]);
    }

    #[test]
    fn what_is_not_evaluated_is_refused_by_name() {
        for (text, says) in [
            ("ANOMALY_DETECTION_BAND(m, 2)", "ANOMALY_DETECTION_BAND with 2 arguments"),
            ("FILL(m)", "FILL with 1 arguments"),
            ("m >", "expected a value, found None"),
            ("(m", "expected \")\""),
            ("m m", "Word(\"m\") after the expression"),
            ("m % 2", "unexpected '%'"),
        ] {
            let error = parse(text).expect_err(text).to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
