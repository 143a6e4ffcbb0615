//! [`ItemStore`] on one DynamoDB table (on-demand billing).
//!
//! Key design: partition key `pk` (S), sort key `sk` (S), the item's JSON in
//! `data` (B); no index. See [`crate::catalog::schema`] for what the keys hold.
//! Requests per operation: `get` is one `GetItem` (strongly consistent, so a
//! version is readable right after its publish); `query_page` one `Query`
//! (1 MB pages, followed by [`crate::query_all`]); `put` one
//! `PutItem`, conditional (`attribute_not_exists(pk)`) for a publish; `take`
//! one `DeleteItem` returning the old item (atomic: one taker wins); `touch`
//! one conditional `UpdateItem` of the `touched_at` attribute alone (the read
//! functions' roles may update nothing else, and only token items); `add`
//! one `UpdateItem` (`ADD n :by SET first_at = if_not_exists(..), last_at,
//! data, expires_at`, `ReturnValues NONE`): atomic, no read (the download
//! functions' roles may update these attributes of usage items only).

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::aws::sdk_error as backend;
use crate::{Add, Condition, Counter, Item, ItemStore, Page, ScanPage, StoreError};

/// Partition key attribute (string) of the table.
pub const PK: &str = "pk";
/// Sort key attribute (string) of the table.
pub const SK: &str = "sk";
const DATA: &str = "data";
/// The table's TTL attribute (number, unix seconds; template.yaml enables it).
pub const EXPIRES_AT: &str = "expires_at";
/// When a token was last used (number, unix seconds): the one attribute the
/// read functions may update (template.yaml).
pub const TOUCHED_AT: &str = "touched_at";
/// A counter's number ([`ItemStore::add`]; template.yaml's `RecordUsage`
/// names these three, `data`, `expires_at` and the keys).
pub const COUNT: &str = "n";
/// When a counter was first added to (unix seconds).
pub const FIRST_AT: &str = "first_at";
/// When a counter was last added to (unix seconds).
pub const LAST_AT: &str = "last_at";
/// The attributes an add names: what the counting roles may update.
pub const ADD_ATTRIBUTES: [&str; 7] = [PK, SK, DATA, EXPIRES_AT, COUNT, FIRST_AT, LAST_AT];
const ABSENT: &str = "attribute_not_exists(pk)";
/// `data` is a reserved word in expressions.
const UNCHANGED: &str = "#data = :old";

/// The DynamoDB item store.
#[derive(Clone, Debug)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

fn to_attrs(item: &Item) -> HashMap<String, AttributeValue> {
    let mut attrs = HashMap::from([
        (PK.to_string(), AttributeValue::S(item.pk.clone())),
        (SK.to_string(), AttributeValue::S(item.sk.clone())),
        (
            DATA.to_string(),
            AttributeValue::B(Blob::new(item.data.clone())),
        ),
    ]);
    if let Some(at) = item.expires_at {
        attrs.insert(EXPIRES_AT.to_string(), AttributeValue::N(at.to_string()));
    }
    if let Some(at) = item.touched_at {
        attrs.insert(TOUCHED_AT.to_string(), AttributeValue::N(at.to_string()));
    }
    if let Some(c) = item.counter {
        for (name, value) in [(COUNT, c.n), (FIRST_AT, c.first_at), (LAST_AT, c.last_at)] {
            attrs.insert(name.to_string(), AttributeValue::N(value.to_string()));
        }
    }
    attrs
}

/// The items of a query's or a scan's page.
fn items_of(items: Option<Vec<HashMap<String, AttributeValue>>>) -> Result<Vec<Item>, StoreError> {
    items.unwrap_or_default().iter().map(from_attrs).collect()
}

fn number(attrs: &HashMap<String, AttributeValue>, name: &str) -> Result<Option<u64>, StoreError> {
    match attrs.get(name) {
        Some(AttributeValue::N(n)) => n
            .parse()
            .map(Some)
            .map_err(|_| StoreError::Internal(format!("item with a bad {name}: {n}"))),
        _ => Ok(None),
    }
}

fn from_attrs(attrs: &HashMap<String, AttributeValue>) -> Result<Item, StoreError> {
    let s = |name: &str| match attrs.get(name) {
        Some(AttributeValue::S(s)) => Ok(s.clone()),
        _ => Err(StoreError::Internal(format!(
            "item without string attribute {name}"
        ))),
    };
    let data = match attrs.get(DATA) {
        Some(AttributeValue::B(b)) => b.clone().into_inner(),
        _ => {
            return Err(StoreError::Internal(
                "item without binary attribute data".into(),
            ));
        }
    };
    Ok(Item {
        pk: s(PK)?,
        sk: s(SK)?,
        data,
        expires_at: number(attrs, EXPIRES_AT)?,
        touched_at: number(attrs, TOUCHED_AT)?,
        counter: match number(attrs, COUNT)? {
            Some(n) => Some(Counter {
                n,
                first_at: number(attrs, FIRST_AT)?.unwrap_or(0),
                last_at: number(attrs, LAST_AT)?.unwrap_or(0),
            }),
            None => None,
        },
    })
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Create the table (on-demand, `pk`/`sk`); used by tests and local set-up.
    /// The deployed stack creates it from `template.yaml`.
    pub async fn create_table(&self) -> Result<(), StoreError> {
        use aws_sdk_dynamodb::types::{
            AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
        };
        let attr = |name: &str| {
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
        };
        let key = |name: &str, ty| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(ty)
                .build()
        };
        self.client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr(PK).map_err(StoreError::internal)?)
            .attribute_definitions(attr(SK).map_err(StoreError::internal)?)
            .key_schema(key(PK, KeyType::Hash).map_err(StoreError::internal)?)
            .key_schema(key(SK, KeyType::Range).map_err(StoreError::internal)?)
            .send()
            .await
            .map_err(backend)?;
        // A new table is CREATING for a while; writes fail until it is ACTIVE.
        for _ in 0..120 {
            let out = self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .await
                .map_err(backend)?;
            let status = out.table.and_then(|t| t.table_status);
            if status == Some(aws_sdk_dynamodb::types::TableStatus::Active) {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        Err(StoreError::Unavailable(format!(
            "table {} did not become ACTIVE",
            self.table
        )))
    }
}

#[async_trait]
impl ItemStore for DynamoStore {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(pk.into()))
            .key(SK, AttributeValue::S(sk.into()))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?;
        out.item.as_ref().map(from_attrs).transpose()
    }

    async fn query_page(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
    ) -> Result<Page, StoreError> {
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .expression_attribute_values(":pk", AttributeValue::S(pk.into()));
        // DynamoDB refuses an empty string for a key attribute, a
        // `begins_with` prefix included (ValidationException): the whole
        // partition is asked for without one.
        query = if sk_prefix.is_empty() {
            query.key_condition_expression("pk = :pk")
        } else {
            query
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":prefix", AttributeValue::S(sk_prefix.into()))
        };
        if let Some(after) = start_after {
            query = query
                .exclusive_start_key(PK, AttributeValue::S(pk.into()))
                .exclusive_start_key(SK, AttributeValue::S(after.into()));
        }
        let out = query.send().await.map_err(backend)?;
        let items = items_of(out.items)?;
        let next = match out.last_evaluated_key.as_ref().and_then(|k| k.get(SK)) {
            Some(AttributeValue::S(sk)) => Some(sk.clone()),
            _ => None,
        };
        Ok(Page { items, next })
    }

    async fn scan_page(&self, start_after: Option<(&str, &str)>) -> Result<ScanPage, StoreError> {
        // Strongly consistent, as every read here: a write acknowledged
        // before the scan began is in it.
        let mut scan = self
            .client
            .scan()
            .table_name(&self.table)
            .consistent_read(true);
        if let Some((pk, sk)) = start_after {
            scan = scan
                .exclusive_start_key(PK, AttributeValue::S(pk.into()))
                .exclusive_start_key(SK, AttributeValue::S(sk.into()));
        }
        let out = scan.send().await.map_err(backend)?;
        let items = items_of(out.items)?;
        let next = out
            .last_evaluated_key
            .as_ref()
            .and_then(|k| match (k.get(PK), k.get(SK)) {
                (Some(AttributeValue::S(pk)), Some(AttributeValue::S(sk))) => {
                    Some((pk.clone(), sk.clone()))
                }
                _ => None,
            });
        Ok(ScanPage { items, next })
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_attrs(&item)));
        match condition {
            Condition::Always => {}
            Condition::IfAbsent => put = put.condition_expression(ABSENT),
            Condition::IfUnchanged(old) => {
                put = put
                    .condition_expression(UNCHANGED)
                    .expression_attribute_names("#data", DATA)
                    .expression_attribute_values(":old", AttributeValue::B(Blob::new(old)));
            }
        }
        match put.send().await {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Err(StoreError::ConditionFailed)
            }
            Err(e) => Err(backend(e)),
        }
    }

    async fn take(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(pk.into()))
            .key(SK, AttributeValue::S(sk.into()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(backend)?;
        out.attributes
            .filter(|a| !a.is_empty())
            .as_ref()
            .map(from_attrs)
            .transpose()
    }

    async fn touch(
        &self,
        pk: &str,
        sk: &str,
        at: u64,
        unless_after: u64,
    ) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(pk.into()))
            .key(SK, AttributeValue::S(sk.into()))
            .update_expression("SET #t = :at")
            .condition_expression(
                "attribute_exists(pk) AND (attribute_not_exists(#t) OR #t < :after)",
            )
            .expression_attribute_names("#t", TOUCHED_AT)
            .expression_attribute_values(":at", AttributeValue::N(at.to_string()))
            .expression_attribute_values(":after", AttributeValue::N(unless_after.to_string()))
            // Said, not left to the default (also NONE): the roles allow this
            // update only when it returns nothing (template.yaml,
            // `dynamodb:ReturnValues` of RecordTokenUse).
            .return_values(aws_sdk_dynamodb::types::ReturnValue::None);
        match update.send().await {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(e) => Err(backend(e)),
        }
    }

    async fn add(&self, add: Add) -> Result<(), StoreError> {
        let mut expression =
            "ADD #n :by SET #first = if_not_exists(#first, :at), #last = :at, #data = :data"
                .to_string();
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(add.pk))
            .key(SK, AttributeValue::S(add.sk))
            .expression_attribute_names("#n", COUNT)
            .expression_attribute_names("#first", FIRST_AT)
            .expression_attribute_names("#last", LAST_AT)
            .expression_attribute_names("#data", DATA)
            .expression_attribute_values(":by", AttributeValue::N(add.by.to_string()))
            .expression_attribute_values(":at", AttributeValue::N(add.at.to_string()))
            .expression_attribute_values(":data", AttributeValue::B(Blob::new(add.data)))
            // Said, not left to the default (also NONE): the counting roles
            // may add only when nothing is returned (template.yaml, RecordUsage).
            .return_values(aws_sdk_dynamodb::types::ReturnValue::None);
        if let Some(at) = add.expires_at {
            expression.push_str(", #expires = :expires");
            update = update
                .expression_attribute_names("#expires", EXPIRES_AT)
                .expression_attribute_values(":expires", AttributeValue::N(at.to_string()));
        }
        update
            .update_expression(expression)
            .send()
            .await
            .map(|_| ())
            .map_err(backend)
    }
}
