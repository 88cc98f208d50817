import type { ComponentSchema } from '../storage/database.ts';

/**
 * Media metadata. The bytes are not here: `blob_key` names them in the MediaStore.
 * A row with `uploaded_ts` NULL is an ID made by /create whose content has not come yet.
 */
export const mediaSchema: ComponentSchema = {
  component: 'media',
  migrations: [
    {
      version: 1,
      description: 'media metadata (local uploads and cached remote media) and kept thumbnails',
      up: (tx) => {
        tx.run(`CREATE TABLE media (
          server_name TEXT NOT NULL,
          media_id TEXT NOT NULL,
          user_id TEXT,
          content_type TEXT,
          upload_name TEXT,
          size INTEGER NOT NULL DEFAULT 0,
          blob_key TEXT,
          created_ts INTEGER NOT NULL,
          uploaded_ts INTEGER,
          expires_ts INTEGER,
          last_access_ts INTEGER NOT NULL,
          remote INTEGER NOT NULL,
          PRIMARY KEY (server_name, media_id)
        )`);
        tx.run('CREATE INDEX media_by_user ON media (user_id) WHERE remote = 0');
        tx.run('CREATE INDEX media_remote_by_access ON media (last_access_ts) WHERE remote = 1');
        tx.run(`CREATE TABLE media_thumbnails (
          server_name TEXT NOT NULL,
          media_id TEXT NOT NULL,
          width INTEGER NOT NULL,
          height INTEGER NOT NULL,
          method TEXT NOT NULL,
          content_type TEXT NOT NULL,
          size INTEGER NOT NULL,
          blob_key TEXT NOT NULL,
          PRIMARY KEY (server_name, media_id, width, height, method)
        )`);
      },
    },
  ],
};
