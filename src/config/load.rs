//! Loading the configuration: placeholder until the INI/TOML/env provider lands.

use std::path::PathBuf;

use super::AgentConfig;

/// Where configuration comes from, in precedence order (later overrides earlier).
#[derive(Debug, Clone, Default)]
pub struct ConfigSources {
    pub config_files: Vec<PathBuf>,
    pub config_dirs: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration loading is not implemented yet")]
    NotImplemented,
}

/// The effective configuration and the warnings produced while loading it.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: AgentConfig,
    pub warnings: Vec<String>,
}

pub fn load(_sources: &ConfigSources) -> Result<LoadedConfig, ConfigError> {
    Err(ConfigError::NotImplemented)
}
