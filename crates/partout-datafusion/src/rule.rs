//! [`PartoutRepartitionRule`] and the one line that registers it.

use crate::config::PartoutConfig;
use crate::exec::PartoutRepartitionExec;
use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::repartition::RepartitionExec;
use std::sync::Arc;

/// Replaces every hash `RepartitionExec`, order-preserving ones included, with a
/// [`PartoutRepartitionExec`] of the same properties, unless `partout.enabled` is false.
/// Registered after DataFusion's own rules, so it sees the plan they settled.
#[derive(Debug, Default, Clone, Copy)]
pub struct PartoutRepartitionRule;

impl PhysicalOptimizerRule for PartoutRepartitionRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let options = config
            .extensions
            .get::<PartoutConfig>()
            .cloned()
            .unwrap_or_default();
        if !options.enabled {
            return Ok(plan);
        }
        plan.transform_up(|node| {
            let replaced = node
                .downcast_ref::<RepartitionExec>()
                .and_then(|r| PartoutRepartitionExec::from_repartition(r, options.buffer_bytes));
            Ok(match replaced {
                Some(exec) => Transformed::yes(Arc::new(exec) as Arc<dyn ExecutionPlan>),
                None => Transformed::no(node),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "partout_repartition"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// partout in one line: `SessionStateBuilder::new()...with_partout()`.
pub trait SessionStateBuilderExt {
    /// Adds [`PartoutRepartitionRule`] after DataFusion's physical optimizer rules, and
    /// partout's options ([`PartoutConfig`]) to the session's config when they are not there
    /// (call it after `with_config`, which replaces the config).
    fn with_partout(self) -> Self;
}

impl SessionStateBuilderExt for SessionStateBuilder {
    fn with_partout(mut self) -> Self {
        let config = self.config().take().unwrap_or_default();
        let config = match config.options().extensions.get::<PartoutConfig>() {
            Some(_) => config,
            None => config.with_option_extension(PartoutConfig::default()),
        };
        self.with_config(config)
            .with_physical_optimizer_rule(Arc::new(PartoutRepartitionRule))
    }
}
